"""A PostgreSQL cluster of a benchmark's own: initdb under a temporary directory, started on a
free port, so that the benchmark can stop and start it without touching the shared server.

PostgreSQL refuses to run as root, so initdb and pg_ctl run as the `postgres` OS user (through
`runuser`) when this process is root. The cluster is stopped and its directory removed at the
end, also when the benchmark fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
        self._pg_ctl("-o", options, "-l", str(self.log_path), "start")

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m fast`: every session is ended and the server shuts down."""
        self._pg_ctl("-m", mode, "stop")

    def running(self) -> bool:
        status = subprocess.run(
            _as_postgres([str(BIN / "pg_ctl"), "-D", str(self.data), "status"]),
            capture_output=True,
            check=False,
        )
        return status.returncode == 0


@contextmanager
def throwaway_cluster() -> Iterator[Cluster]:
    """A fresh cluster (trust authentication, superuser `postgres`), running on 127.0.0.1."""
    directory = Path(tempfile.mkdtemp(prefix="tucano_pg_"))
    if os.geteuid() == 0:
        shutil.chown(directory, OS_USER, OS_USER)
    cluster = Cluster(directory, free_port())
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
