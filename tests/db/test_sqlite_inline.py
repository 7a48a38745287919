"""SQLite reads on the event loop's thread (db/sqlite_inline.py): a request's reads run where
they are awaited, with no driver thread; reads of whole tables stay off the loop."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from tucano.db.database import Database
from tucano.migrations import upgrade
from tucano.payment_links import reads
from tucano.payment_links.models import PaymentLink

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


async def test_a_compiled_read_reads_rows_as_sqlalchemy_does(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'links.db'}"
    await asyncio.to_thread(upgrade, url)
    database = Database(url)
    try:
        link = PaymentLink(
            uuid=uuid.uuid4(),
            customer_id=7,
            payer_name="Maria",
            registration_number="52998224725",
            amount_cents=1050,
            numbers_installments=2,
            description=None,
            user_reference="ref",
            expiration_days=5,
            verification_token=123456,
            status="CREATED",
            created_at=datetime(2026, 12, 2, 10, 0, 0, 0, tzinfo=UTC),
            expires_at=datetime(2026, 12, 7, 10, 0, 0, 123000, tzinfo=UTC),
            autopay_at=None,
            pix_txid="TXID0123456789ABCDEFGHIJ",
        )
        async with database.session() as session:
            session.add(link)
            await session.commit()
        values = {"link_uuid": link.uuid, "customer": 7}
        async with database.read_engine.connect() as connection:
            expected = (await connection.execute(reads._READ_LINK, values)).first()
        compiled = reads._READ_LINK_ON_SQLITE
        found = compiled.first(database.inline_sqlite(), values)
        assert found is not None and expected is not None
        assert tuple(found) == tuple(expected)
        assert found.uuid == link.uuid and found.expires_at == link.expires_at
        # Another customer's key finds nothing.
        assert compiled.first(database.inline_sqlite(), {**values, "customer": 8}) is None
    finally:
        await database.dispose()
