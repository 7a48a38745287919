"""PostgreSQL's load over a span of a benchmark, on a cluster of the benchmark's own
(bench/throwaway_postgres.py started with `SETTINGS`), so that nothing else on a shared server
counts: the statements one role ran (pg_stat_statements' calls, BEGIN and COMMIT included, as
the server answers each), the WAL written (`pg_current_wal_lsn()` before and after) and the
server's CPU time (its processes, from /proc).

The service's servers connect as `SERVICE_ROLE`, which owns the schema, and its workers as
`WORKER_ROLE`, a member of it, so that each side's statements are counted apart; the benchmark's
own (the reset, the reads, waiting for a queue to empty) run as the superuser `postgres` and are
left out. Statements are listed by kind: pg_stat_statements (before PostgreSQL 18) keeps one
entry per length of an `IN (...)` list, which are added up here.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from bench.throwaway_postgres import Cluster
from tucano.db.engines import connect_asyncpg

SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_utility": "on",
    # No checkpoint of the server's own in a measured span: each span starts after one
    # (`checkpoint`), so its full-page images are the same in every row.
    "checkpoint_timeout": "1h",
    "max_wal_size": "16GB",
}
SERVICE_ROLE = "tucano"
WORKER_ROLE = "tucano_worker"
# An IN list of parameters, and a parameter: written alike in every statement of one kind.
IN_LIST = re.compile(r"IN \((\$\d+(::\w+)?(, )?)+\)")
PARAMETER = re.compile(r"\$\d+")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Statement:
    query: str  # on one line, IN lists and parameters written alike
    calls: int
    rows: int  # returned or written, over every call
    blocks: int  # shared buffers hit or read, over every call
    exec_ms: float  # time executing, over every call


@dataclass(frozen=True)
class Load:
    statements: int  # calls of every statement the role ran
    blocks: int  # shared buffer blocks those statements hit or read
    wal_bytes: int
    cpu_seconds: float  # of every process of the server
    top: list[Statement]  # the kinds most called, most first


async def prepared(cluster: Cluster) -> str:
    """The roles and pg_stat_statements; the URL the service's servers connect with."""
    connection = await connect_asyncpg(cluster.url)
    try:
        await connection.execute(f"CREATE ROLE {SERVICE_ROLE} LOGIN CREATEDB")
        await connection.execute(f"CREATE ROLE {WORKER_ROLE} LOGIN IN ROLE {SERVICE_ROLE}")
        await connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    finally:
        await connection.close()
    return as_role(cluster.url, SERVICE_ROLE)


def as_role(database_url: str, role: str) -> str:
    return make_url(database_url).set(username=role).render_as_string(hide_password=False)


def kinds(rows: list[Any], top: int) -> list[Statement]:
    """pg_stat_statements' rows added up by kind, the `top` most called."""
    summed: dict[str, list[float]] = {}
    for r in rows:
        query = PARAMETER.sub("$", IN_LIST.sub("IN (...)", " ".join(r["query"].split())))
        tally = summed.setdefault(query, [0, 0, 0, 0.0])
        for i, value in enumerate((r["calls"], r["rows"], r["blocks"], r["total_exec_time"])):
            tally[i] += value
    ranked = sorted(summed.items(), key=lambda kind: -kind[1][0])[:top]
    return [Statement(q, int(c), int(n), int(b), t) for q, (c, n, b, t) in ranked]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return None


def server_cpu_seconds(cluster: Cluster) -> float:
    """User and system CPU time of the server: the postmaster, the children it has reaped
    (backends that ended) and those still running."""
    postmaster = cluster.postmaster_pid()
    ticks = 0
    fields = _stat_fields(postmaster)
    if fields is not None:
        ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[1]) == postmaster:  # the parent's pid (field 4)
            ticks += int(fields[11]) + int(fields[12])
    return ticks / TICKS


class LoadMeter:
    """Measures the load between `start()` and `read()`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.wal_position = 0  # bytes of WAL since the cluster began
        self.cpu = 0.0

    async def _run(self, query: str, *args: Any) -> Any:
        connection = await connect_asyncpg(self.cluster.url)
        try:
            return await connection.fetch(query, *args)
        finally:
            await connection.close()

    async def _wal_position(self) -> int:
        rows = await self._run("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
        return int(rows[0][0])

    async def checkpoint(self) -> None:
        await self._run("CHECKPOINT")

    async def start(self) -> None:
        await self._run("SELECT pg_stat_statements_reset()")
        self.wal_position = await self._wal_position()
        self.cpu = server_cpu_seconds(self.cluster)

    async def read(self, role: str, top: int = 5) -> Load:
        """The load since `start()`, with the statements `role` ran."""
        cpu = server_cpu_seconds(self.cluster)
        wal = await self._wal_position() - self.wal_position
        rows = await self._run(
            "SELECT query, calls, rows, shared_blks_hit + shared_blks_read AS blocks,"
            " total_exec_time FROM pg_stat_statements"
            " WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = $1)",
            role,
        )
        return Load(
            sum(r["calls"] for r in rows),
            sum(r["blocks"] for r in rows),
            wal,
            cpu - self.cpu,
            kinds(rows, top),
        )


async def emptied(database_url: str, table: str, within: float) -> bool:
    """Whether `table` of the service's database had no row left within `within` seconds
    (asked as the benchmark's role, so the asking is not counted)."""
    connection = await connect_asyncpg(as_role(database_url, "postgres"))
    try:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if await connection.fetchval(f"SELECT count(*) FROM {table}") == 0:  # noqa: S608
                return True
            await asyncio.sleep(0.05)
        return False
    finally:
        await connection.close()
