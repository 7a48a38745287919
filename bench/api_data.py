"""The data `bench/api.py` runs on, on SQLite or PostgreSQL: webhooks of the merchant through
the API, and payment links of today loaded straight into the database with the day totals the
list reads (as `bench/payment_links.py` loads them, but in today's window and on both)."""

from __future__ import annotations

import random
import secrets
import sqlite3
import uuid
from datetime import UTC, datetime, time, timedelta
from typing import Any

import aiohttp
from sqlalchemy.engine.url import make_url

from tucano.db.database import Database
from tucano.db.engines import connect_asyncpg
from tucano.events.types import EventType
from tucano.payment_links.totals_repository import DayTotalRepository

# The columns of a loaded link, in the order today_links gives them.
LINK_COLUMNS = (
    *("uuid", "customer_id", "payer_name", "registration_number", "amount_cents"),
    *("numbers_installments", "description", "user_reference", "expiration_days"),
    *("verification_token", "status", "created_at", "expires_at", "autopay_at", "pix_txid"),
)

# A tenth of the loaded links are paid: their payments, from the links themselves.
_PAYMENTS = """
INSERT INTO payment_link_payments (link_id, customer_id, method, payment_id, payment_receipt,
    installments, amount_cents, installment_cents, paid_at)
SELECT id, customer_id, 1 + id % 2, 'pay_' || id, 'R' || id, 1, amount_cents, NULL, created_at
  FROM payment_links WHERE status = 'PAID'
"""


def sqlite_path(database_url: str) -> str:
    path = make_url(database_url).database
    assert path, database_url
    return path


async def register_webhooks(
    http: aiohttp.ClientSession, base_url: str, token: str, count: int
) -> None:
    """`count` webhooks of the merchant, one per event type in turn: only the first is
    PIX_OUTBOUND, so each published PIX_OUTBOUND event makes one delivery."""
    types = list(EventType)
    for i in range(count):
        body = {"targetUrl": f"http://127.0.0.1:9/hook/{i}", "eventType": types[i % len(types)]}
        headers = {"Authorization": f"Bearer {token}", "x-transaction-id": str(uuid.uuid4())}
        async with http.post(
            base_url + "/webhook/v1/create", json=body, headers=headers
        ) as response:
            if response.status != 200:
                raise RuntimeError(f"webhook not created: {await response.text()}")


def today_links(customer_id: int, count: int, now: datetime) -> list[tuple[Any, ...]]:
    """`count` links of the customer created evenly between midnight (UTC) and `now`, a tenth
    paid, in LINK_COLUMNS order."""
    midnight = datetime.combine(now.date(), time(0), tzinfo=UTC)
    step = (now - midnight) / (count + 1)
    rng = random.Random(7)
    rows = []
    for i in range(1, count + 1):
        created = midnight + step * i
        days = 1 + i % 10
        rows.append(
            (
                uuid.UUID(int=rng.getrandbits(128), version=4),
                customer_id,
                f"Payer {i}",
                f"{i % 99_999_999_999:011d}",
                100 + (i * 7919) % 500_000,
                1 + i % 10,
                None,
                f"ref-{i % 1000}",
                days,
                100_000 + i % 900_000,
                "PAID" if i % 10 == 0 else "CREATED",
                created,
                created + timedelta(days=days),
                None,
                secrets.token_hex(12).upper() + "X",  # 25 characters, as BR Code txids are
            )
        )
    return rows


def _sqlite_value(value: Any) -> Any:
    """How SQLAlchemy stores a value on SQLite: UUIDs as 32 hex digits, timestamps as naive UTC
    text with microseconds."""
    if isinstance(value, uuid.UUID):
        return value.hex
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    return value


async def load_links(database_url: str, rows: list[tuple[Any, ...]]) -> None:
    """The links of `rows`, their payments, the day totals counted once (as the migration does
    for links that predate them) and the planner's statistics."""
    if database_url.startswith("sqlite"):
        connection = sqlite3.connect(sqlite_path(database_url))
        try:
            marks = ", ".join("?" for _ in LINK_COLUMNS)
            with connection:
                connection.executemany(
                    f"INSERT INTO payment_links ({', '.join(LINK_COLUMNS)}) VALUES ({marks})",  # noqa: S608
                    [tuple(_sqlite_value(v) for v in row) for row in rows],
                )
                connection.execute(_PAYMENTS)
        finally:
            connection.close()
    else:
        pg = await connect_asyncpg(database_url)
        try:
            await pg.copy_records_to_table("payment_links", records=rows, columns=LINK_COLUMNS)
            await pg.execute(_PAYMENTS)
        finally:
            await pg.close()
    await rebuild_day_totals(database_url)
    if database_url.startswith("sqlite"):
        connection = sqlite3.connect(sqlite_path(database_url))
        try:
            connection.execute("ANALYZE")
        finally:
            connection.close()
    else:
        pg = await connect_asyncpg(database_url)
        try:
            # What autovacuum does on a live database: statistics, and the visibility map that
            # index-only scans need.
            for table in ("payment_links", "payment_link_payments", "payment_link_day_totals"):
                await pg.execute(f"VACUUM ANALYZE {table}")
        finally:
            await pg.close()


async def rebuild_day_totals(database_url: str) -> None:
    """The service keeps day totals as it creates and pays links; links loaded straight into
    the tables need them counted once, as the migration does for links that predate it."""
    database = Database(database_url)
    try:
        async with database.session() as session:
            await DayTotalRepository(session).rebuild()
            await session.commit()
    finally:
        await database.dispose()
