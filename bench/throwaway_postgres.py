"""A PostgreSQL cluster of a benchmark's own: initdb under a temporary directory, started on a
free port, so that the benchmark can stop and start it without touching the shared server.

A caller may pass server settings (`-c name=value` at each start), e.g.
`shared_preload_libraries=pg_stat_statements` to count the statements a benchmark causes.

PostgreSQL refuses to run as root, so initdb and pg_ctl run as the `postgres` OS user (through
`runuser`) when this process is root. The cluster is stopped and its directory removed at the
end, also when the benchmark fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import free_port

BIN = Path(os.environ.get("TUCANO_BENCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
OS_USER = "postgres"


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", OS_USER, "--", *argv] if os.geteuid() == 0 else argv


@dataclass
class Cluster:
    directory: Path  # holds data/, the socket and the server's log
    port: int
    settings: dict[str, str] = field(default_factory=dict)  # passed as -c name=value

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            _as_postgres([str(BIN / "pg_ctl"), "-D", str(self.data), "-w", *args]),
            check=True,
            capture_output=True,
            timeout=timeout,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory}"
            " -c fsync=off -c max_connections=200"
        )
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        self._pg_ctl("-o", options, "-l", str(self.log_path), "start")

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m fast`: every session is ended and the server shuts down."""
        self._pg_ctl("-m", mode, "stop")

    def postmaster_pid(self) -> int:
        """The server's main process (the first line of postmaster.pid), whose children are
        the backends and background processes."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def running(self) -> bool:
        status = subprocess.run(
            _as_postgres([str(BIN / "pg_ctl"), "-D", str(self.data), "status"]),
            capture_output=True,
            check=False,
        )
        return status.returncode == 0


@contextmanager
def throwaway_cluster(settings: Mapping[str, str] | None = None) -> Iterator[Cluster]:
    """A fresh cluster (trust authentication, superuser `postgres`), running on 127.0.0.1 with
    the server `settings` given."""
    directory = Path(tempfile.mkdtemp(prefix="tucano_pg_"))
    if os.geteuid() == 0:
        shutil.chown(directory, OS_USER, OS_USER)
    cluster = Cluster(directory, free_port(), dict(settings or {}))
    try:
        subprocess.run(
            _as_postgres(
                [str(BIN / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U", "postgres"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        cluster.start()
        yield cluster
    finally:
        if cluster.data.exists() and cluster.running():
            cluster.stop("immediate")
        shutil.rmtree(directory, ignore_errors=True)
