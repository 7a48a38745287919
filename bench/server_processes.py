"""The servers `bench/servers.py` compares, each started in a process of its own on the CPU set
aside for it: Tucano and a bare route, on uvicorn and on granian."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import (
    ServeProcess,
    clean_env,
    free_port,
    run_tucano,
    start_listening,
    start_serve,
)

SERVERS = ("uvicorn", "granian")
GRANIAN = str(Path(sys.executable).parent / "granian")


@dataclass(frozen=True)
class Kind:
    server: str  # "uvicorn" or "granian"
    app: str  # "tucano" or "bare"

    @property
    def label(self) -> str:
        return f"{self.server} / {'Tucano' if self.app == 'tucano' else 'bare route'}"


@dataclass(frozen=True)
class Setup:
    """What every server of one run shares: a directory, the database and the settings."""

    workdir: Path
    env: dict[str, str]
    header_timeout_seconds: float
    max_connections: int | None
    server_cpus: set[int] | None  # None: placement left to the operating system

    @classmethod
    def make(
        cls,
        workdir: Path,
        database_url: str,
        *,
        header_timeout_seconds: float,
        max_connections: int | None,
        server_cpus: set[int] | None,
    ) -> Setup:
        env = clean_env(
            TUCANO_DATABASE_URL=database_url,
            TUCANO_ENVIRONMENT="sandbox",
            TUCANO_SECRET_KEY=secrets.token_urlsafe(48),
            TUCANO_LOG_LEVEL="WARNING",
            # The benchmark measures the server, not the per-client rate limit.
            TUCANO_RATE_LIMIT="1000000/second",
        )
        if max_connections is not None:
            env["TUCANO_MAX_CONNECTIONS"] = str(max_connections)
        return cls(workdir, env, header_timeout_seconds, max_connections, server_cpus)

    def migrate(self) -> None:
        done = run_tucano("migrate", cwd=self.workdir, env=self.env, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"tucano migrate failed: {done.stderr}")

    def create_client(self, customer_id: int) -> dict[str, str]:
        done = run_tucano(
            "clients", "create", "--customer-id", str(customer_id), cwd=self.workdir, env=self.env
        )
        if done.returncode != 0:
            raise RuntimeError(f"tucano clients create failed: {done.stderr}")
        client: dict[str, str] = json.loads(done.stdout)
        return client

    def start(self, kind: Kind) -> ServeProcess:
        with forked_onto(self.server_cpus):
            if kind == Kind("uvicorn", "tucano"):
                # The real command, so that uvicorn runs exactly as Tucano sets it up.
                return start_serve(self.workdir, self.env, "--no-worker")
            port = free_port()
            return start_listening(
                self.argv(kind, port),
                port=port,
                cwd=self.workdir,
                env=self.env,
                log_path=self.workdir / f"{kind.server}-{kind.app}-{port}.log",
                name=kind.label,
                health_path="/health" if kind.app == "tucano" else "/",
            )

    def argv(self, kind: Kind, port: int) -> list[str]:
        factory = f"bench.server_apps:{kind.app}_app"
        if kind.server == "uvicorn":
            return [
                *(sys.executable, "-m", "uvicorn", "--factory", factory),
                *("--loop", "uvloop", "--http", "httptools", "--no-access-log"),
                *("--log-level", "warning", "--host", "127.0.0.1", "--port", str(port)),
            ]
        # granian's backpressure caps the connections a worker accepts (unset: backlog / workers,
        # 1,024): its equivalent of a connection cap.
        cap = () if self.max_connections is None else ("--backpressure", str(self.max_connections))
        return [
            *(GRANIAN, "--interface", "asgi", "--factory", "--loop", "uvloop"),
            *("--workers", "1", "--http", "1", "--log-level", "warning", *cap),
            *("--http1-header-read-timeout", str(round(self.header_timeout_seconds * 1000))),
            *("--host", "127.0.0.1", "--port", str(port), factory),
        ]


@contextlib.contextmanager
def forked_onto(cpus: set[int] | None) -> Iterator[None]:
    """Processes started inside run on `cpus`, with every thread and child process they make.
    (Pinning a pid afterwards moves only its main thread, not the threads it has already
    started, such as aiosqlite's, nor granian's worker process.)"""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)  # this thread only; a fork inherits it
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def stop(process: ServeProcess) -> None:
    """Stop gracefully, or kill after 15 s (a server may wait for connections that never end)."""
    try:
        process.stop(timeout=15)
    except Exception:
        process.process.kill()
        process.process.wait()


def tree_pids(pid: int) -> list[int]:
    """`pid` and its descendants (granian serves from a child process)."""
    pids, pending = [], [pid]
    while pending:
        current = pending.pop()
        pids.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
    return pids


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system, every thread) `pid` and its descendants have used so far."""
    ticks = 0
    for current in tree_pids(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_facts(pid: int) -> str:
    """The CPUs any thread of `pid` and its descendants may run on, and the highest soft limit on
    open files among them: to check the placement and what the server could hold."""
    cpus: set[int] = set()
    files = 0
    for current in tree_pids(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/limits").read_text().splitlines():
                if line.startswith("Max open files"):
                    files = max(files, int(line.split()[3]))
            for task in Path(f"/proc/{current}/task").iterdir():
                cpus |= os.sched_getaffinity(int(task.name))
    return f"CPUs {sorted(cpus)}, open files {files:,}"
