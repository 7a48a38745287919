"""The periodic jobs' runner: a job that keeps failing (the database down) backs off and logs
one traceback, then a line per failure, and says when it works again."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession
from structlog.testing import capture_logs

from tucano import jobs
from tucano.db.database import Database
from tucano.jobs import PeriodicJob, run_periodic_jobs


async def test_a_failing_job_backs_off_and_logs_one_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs, "JOB_PAUSE_MAX_SECONDS", 0.16)
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/jobs.db")
    stop = asyncio.Event()
    runs: list[float] = []

    async def flaky(_session: AsyncSession) -> int:
        runs.append(time.monotonic())
        if len(runs) <= 5:
            raise OSError("connection refused")
        stop.set()
        return 0

    try:
        with capture_logs() as logs:
            await asyncio.wait_for(
                run_periodic_jobs(database, [PeriodicJob("flaky", 0.01, flaky)], stop), 10
            )
    finally:
        await database.dispose()

    failed = [entry for entry in logs if entry["event"] == "job_failed"]
    assert len(failed) == 5
    assert failed[0].get("exc_info") is True  # the traceback, once
    assert [f.get("failuresInARow") for f in failed[1:]] == [2, 3, 4, 5]
    assert all("connection refused" in f["error"] and "exc_info" not in f for f in failed[1:])
    assert [e["failuresInARow"] for e in logs if e["event"] == "job_resumed"] == [5]
    # Each wait doubles, from twice the interval, up to the cap: 0.02, 0.04, 0.08, 0.16, 0.16.
    gaps = [later - earlier for earlier, later in itertools.pairwise(runs)]
    for gap, least in zip(gaps, [0.02, 0.04, 0.08, 0.16, 0.16], strict=True):
        assert gap >= least * 0.9, gaps


async def test_a_job_that_finds_the_database_unavailable_logs_no_traceback(tmp_path: Path) -> None:
    # Another process holding SQLite's lock, PostgreSQL restarting: nothing to debug, a line is
    # enough (regression check: the first failure logged a traceback at error level).
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/jobs.db")
    stop = asyncio.Event()

    async def locked_out(_session: AsyncSession) -> int:
        stop.set()
        raise sqlite3.OperationalError("database is locked")

    try:
        with capture_logs() as logs:
            await asyncio.wait_for(
                run_periodic_jobs(database, [PeriodicJob("pruning", 0.01, locked_out)], stop), 10
            )
    finally:
        await database.dispose()
    (failed,) = [entry for entry in logs if entry["event"] == "job_failed"]
    assert failed["log_level"] == "warning" and "exc_info" not in failed
    assert "database is locked" in failed["error"]
