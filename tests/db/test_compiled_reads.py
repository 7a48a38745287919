"""Compiled reads (db/compiled_reads.py): the hottest SELECTs run straight on the driver's
connection read their rows as SQLAlchemy would, on both databases."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from itertools import count

import pytest
from sqlalchemy import bindparam, select

from tucano.db.compiled_reads import compiled_read
from tucano.db.database import Database
from tucano.payment_links import reads
from tucano.payment_links.models import PaymentLink

_customers = count(9_100_000)


def _link(customer_id: int) -> PaymentLink:
    return PaymentLink(
        uuid=uuid.uuid4(),
        customer_id=customer_id,
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
        pix_txid=f"TX{uuid.uuid4().hex[:23].upper()}",
    )


async def test_a_compiled_read_reads_rows_as_sqlalchemy_does(database: Database) -> None:
    customer = next(_customers)
    link = _link(customer)
    async with database.session() as session:
        session.add(link)
        await session.commit()
    values = {"link_uuid": link.uuid, "customer": customer}
    async with database.read_engine.connect() as connection:
        expected = (await connection.execute(reads._READ_LINK, values)).first()
    compiled = compiled_read(database.dialect, reads._READ_LINK, reads._LinkRow)
    async with database.compiled_read_connection() as connection:
        found = await compiled.first(connection, values)
        # Another customer's key finds nothing.
        missing = await compiled.first(connection, {**values, "customer": customer + 1})
    assert found is not None and expected is not None
    assert tuple(found) == tuple(expected)
    assert found.uuid == link.uuid and found.expires_at == link.expires_at
    assert found.expires_at.tzinfo is not None  # UTC, as the column type reads it
    assert missing is None


async def test_a_compiled_read_reads_every_row(database: Database) -> None:
    customer = next(_customers)
    links = [_link(customer) for _ in range(3)]
    async with database.session() as session:
        session.add_all(links)
        await session.commit()
    customers_links = (
        select(*reads.LINKS.c, *reads.PAYMENT_VIEW)
        .outerjoin(reads.PAYMENTS, reads.PAYMENTS.c.link_id == reads.LINKS.c.id)
        .where(reads.LINKS.c.customer_id == bindparam("customer"))
        .order_by(reads.LINKS.c.id)
    )
    listed = compiled_read(database.dialect, customers_links, reads._LinkRow)
    async with database.compiled_read_connection() as connection:
        rows = await listed.all(connection, {"customer": customer})
        others = await listed.all(connection, {"customer": next(_customers)})
    assert [row.uuid for row in rows] == [link.uuid for link in links]
    assert others == []


async def test_a_read_given_up_part_way_leaves_its_connection_usable(database_url: str) -> None:
    """A request cancelled while its statement runs (a client gone, a timeout) must not hand
    the next request a connection still busy with it: asyncpg cancels the statement on the
    server, and the connection's next statement waits for that."""
    if not database_url.startswith("postgresql"):
        pytest.skip("an SQLite read runs to its end on the loop: nothing can give it up")
    database = Database(database_url, pool_size=1)
    try:

        async def read_slowly() -> None:
            async with database.compiled_read_connection() as connection:
                await connection.fetch("SELECT pg_sleep(5)")

        given_up = asyncio.create_task(read_slowly())
        await asyncio.sleep(0.3)
        given_up.cancel()
        with pytest.raises(asyncio.CancelledError):
            await given_up
        started = time.monotonic()
        compiled = compiled_read(database.dialect, reads._READ_LINK, reads._LinkRow)
        async with database.compiled_read_connection() as connection:
            found = await compiled.first(connection, {"link_uuid": uuid.uuid4(), "customer": 1})
        assert found is None
        assert time.monotonic() - started < 4  # not after the 5 s sleep it gave up
    finally:
        await database.dispose()
