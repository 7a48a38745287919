"""SQLite reads on the event loop's thread (db/sqlite_inline.py): a request's reads run where
they are awaited, with no driver thread; reads of whole tables stay off the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from tucano.db.database import Database

# A statement that keeps SQLite busy for a while (tenths of a second here), reading nothing.
_LONG_COUNT = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000000) "
    "SELECT count(*) FROM n"
)


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    async with database.session() as session:
        await session.execute(text("CREATE TABLE notes (body TEXT NOT NULL)"))
        await session.execute(text("INSERT INTO notes VALUES ('kept')"))
        await session.commit()
    yield database
    await database.dispose()


async def test_a_read_session_reads_without_a_driver_thread(database: Database) -> None:
    threads_before = threading.active_count()
    async with database.read_session() as session:
        assert list(await session.scalars(text("SELECT body FROM notes"))) == ["kept"]
    async with database.read_engine.connect() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM notes"))).scalar() == 1
    assert threading.active_count() == threads_before


async def test_reads_on_the_loop_see_each_commit_at_once(database: Database) -> None:
    async with database.read_session() as reader:
        assert await reader.scalar(text("SELECT count(*) FROM notes")) == 1
    async with database.session() as writer:
        await writer.execute(text("INSERT INTO notes VALUES ('new')"))
        await writer.commit()
    async with database.read_session() as reader:
        assert await reader.scalar(text("SELECT count(*) FROM notes")) == 2


async def test_a_long_bulk_read_leaves_the_event_loop_free(database: Database) -> None:
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        await asyncio.sleep(0.02)
        started = time.monotonic()
        async with database.bulk_read_session() as session:
            assert await session.scalar(text(_LONG_COUNT)) == 2_000_000
        finished = time.monotonic()
    finally:
        ticker.cancel()
    during = [t for t in ticks if started < t < finished]
    # The loop kept ticking while SQLite counted on the driver's thread.
    assert finished - started > 0.05
    assert len(during) >= (finished - started) / 0.01 / 4


async def test_a_read_session_refuses_writes_on_the_loop_too(database: Database) -> None:
    async with database.read_session() as session:
        with pytest.raises(Exception, match="readonly"):
            await session.execute(text("INSERT INTO notes VALUES ('x')"))
