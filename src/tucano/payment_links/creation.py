"""Creating a payment link, idempotently: an x-transaction-id of a customer creates one link,
and the same request again within 24 hours is answered as the first time."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.pix import new_br_code_txid
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import Conflict, ErrorCode
from tucano.core.idempotency import IdempotencyStore
from tucano.core.money import to_cents
from tucano.db.database import Database
from tucano.db.sqlite_handover import immediate_transaction, sqlite_parameters
from tucano.payment_links import totals
from tucano.payment_links.models import IdempotencyKey, PaymentLink
from tucano.payment_links.schemas import PaymentLinkCreate, expiration_of

IDEMPOTENCY_WINDOW = timedelta(hours=24)


def request_fingerprint(data: PaymentLinkCreate) -> str:
    """The same request, whatever its spelling (10.5 or 10.50, punctuation in the document)."""
    canonical = json_codec.dumps(data.model_dump(mode="python", by_alias=True))
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class IdempotencyRef:
    """An x-transaction-id of a customer, and the fingerprint of the request it came with."""

    customer_id: int
    key: uuid.UUID
    fingerprint: str


def idempotency_conflict() -> Conflict:
    return Conflict(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "this x-transaction-id created a payment link with a different body in the last "
        "24 hours; send a new UUID for a new link",
    )


LINK_KEYS = IdempotencyStore(
    table=cast(Table, IdempotencyKey.__table__),
    owner="customer_id",
    window=IDEMPOTENCY_WINDOW,
    conflict=idempotency_conflict,
)


def new_link(
    *, customer_id: int, data: PaymentLinkCreate, autopay_delay: timedelta | None
) -> PaymentLink:
    """A new CREATED link, not stored yet. `autopay_delay` (sandbox only) schedules the
    automatic PIX payment of a link whose amount ends in 01 cents."""
    now = clock.now()
    cents = to_cents(data.amount)
    return PaymentLink(
        uuid=uuid.uuid4(),
        customer_id=customer_id,
        payer_name=data.payer_name,
        registration_number=data.registration_number,
        amount_cents=cents,
        numbers_installments=data.numbers_installments,
        description=data.description,
        user_reference=data.user_reference,
        expiration_days=data.expiration_days,
        verification_token=100_000 + secrets.randbelow(900_000),
        status="CREATED",
        created_at=now,
        expires_at=expiration_of(now, data.expiration_days),
        autopay_at=now + autopay_delay if autopay_delay is not None and cents % 100 == 1 else None,
        pix_txid=new_br_code_txid(),
    )


# A new link's columns, as both databases' statements below insert them (and bench/ loads them).
LINK_COLUMNS = (
    "uuid",
    "customer_id",
    "payer_name",
    "registration_number",
    "amount_cents",
    "numbers_installments",
    "description",
    "user_reference",
    "expiration_days",
    "verification_token",
    "status",
    "created_at",
    "expires_at",
    "autopay_at",
    "pix_txid",
)
# PostgreSQL: the idempotency key and the link in one statement (in autocommit, so atomic by
# itself). The link goes in only if the key did; no link: the caller reads what the key holds.
_KEY_ON_POSTGRES = LINK_KEYS.remember_sql(
    owner="$2", key="$16", fingerprint="$17", answer="$18", now="$12", window_start="$19"
)
_CREATE_ON_POSTGRES = f"""
WITH key AS (
{_KEY_ON_POSTGRES}
), link AS (
    INSERT INTO payment_links ({", ".join(LINK_COLUMNS)})
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
     WHERE EXISTS (SELECT 1 FROM key)
    RETURNING 1
), counted AS (
    INSERT INTO payment_link_day_changes ({", ".join(totals.KEY)}, link_count, amount_cents)
    SELECT $2, $20, $9, 'CREATED', {totals.UNPAID}, 1, $5 WHERE EXISTS (SELECT 1 FROM link)
)
SELECT count(*) FROM link
"""  # noqa: S608 - our own column names
_STORED_ANSWER_ON_POSTGRES = LINK_KEYS.find_sql(owner="$1", key="$2", window_start="$3")


async def create_link(
    database: Database, *, ref: IdempotencyRef, link: PaymentLink, response: bytes
) -> bytes:
    """Store `link` with `response` as the answer to its x-transaction-id, and return the
    answer to send: `response`, or, when the x-transaction-id was used in the last 24 hours,
    the answer it had then (409 if that was for a different request). One link per key, even
    when requests with the same key race."""
    if database.dialect == "postgresql":
        return await _create_on_postgres(database, ref=ref, link=link, response=response)
    return await database.run_on_sqlite(_sqlite_creator(ref=ref, link=link, response=response))


async def _create_on_postgres(
    database: Database, *, ref: IdempotencyRef, link: PaymentLink, response: bytes
) -> bytes:
    window_start = link.created_at - IDEMPOTENCY_WINDOW
    async with database.driver_connection() as connection:
        created = await connection.fetchval(
            _CREATE_ON_POSTGRES,
            *(getattr(link, name) for name in LINK_COLUMNS),
            ref.key,
            ref.fingerprint,
            response.decode(),
            window_start,
            link.created_at.date(),  # created_at is UTC
        )
        stored = (
            None
            if created
            else await connection.fetchrow(
                _STORED_ANSWER_ON_POSTGRES, ref.customer_id, ref.key, window_start
            )
        )
    if created:
        return response
    if stored is None:  # the key expired in between: a new request after all
        return await _create_on_postgres(database, ref=ref, link=link, response=response)
    replay = LINK_KEYS.replay(stored, (ref.fingerprint,))
    assert replay is not None
    return replay


# SQLite: the same, as one transaction on the driver's thread in one hand-over (the write lock
# held from its start, so no other request with this key can come in between).
_FIND_ON_SQLITE = LINK_KEYS.find_sql()
_KEY_ON_SQLITE = LINK_KEYS.remember_sql()
_LINK_ON_SQLITE = (
    f"INSERT INTO payment_links ({', '.join(LINK_COLUMNS)}) "  # noqa: S608 - our own names
    f"VALUES ({', '.join(':' + name for name in LINK_COLUMNS)})"
)
_CHANGE_ON_SQLITE = (
    f"INSERT INTO payment_link_day_changes ({', '.join(totals.CHANGE_COLUMNS)}) "  # noqa: S608
    f"VALUES ({', '.join(':' + name for name in totals.CHANGE_COLUMNS)})"
)


def _sqlite_creator(
    *, ref: IdempotencyRef, link: PaymentLink, response: bytes
) -> Callable[[sqlite3.Connection], bytes]:
    now = clock.now()
    key = sqlite_parameters(
        LINK_KEYS.table,
        {
            LINK_KEYS.owner: ref.customer_id,
            "key": ref.key,
            "request_hash": ref.fingerprint,
            "response": response.decode(),
            "created_at": now,
        },
    )
    window_start = sqlite_parameters(LINK_KEYS.table, {"created_at": now - IDEMPOTENCY_WINDOW})
    key_values = {
        "owner": key[LINK_KEYS.owner],
        "key": key["key"],
        "fingerprint": key["request_hash"],
        "answer": key["response"],
        "now": key["created_at"],
        "window_start": window_start["created_at"],
    }
    link_values = sqlite_parameters(
        cast(Table, PaymentLink.__table__), {name: getattr(link, name) for name in LINK_COLUMNS}
    )
    counted = sqlite_parameters(
        totals.CHANGES, totals.change(link, status="CREATED", method=totals.UNPAID, sign=1)
    )

    def create(connection: sqlite3.Connection) -> bytes:
        with immediate_transaction(connection):
            stored = connection.execute(_FIND_ON_SQLITE, key_values).fetchone()
            replay = LINK_KEYS.replay(stored, (ref.fingerprint,))
            if replay is not None:
                return replay
            # No live key (the lock is held): an expired one is taken over.
            connection.execute(_KEY_ON_SQLITE, key_values).fetchall()
            connection.execute(_LINK_ON_SQLITE, link_values)
            connection.execute(_CHANGE_ON_SQLITE, counted)
        return response

    return create


async def prune_idempotency_keys(
    session: AsyncSession, *, now: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of keys older than their window (the runner calls again while there are
    more)."""
    return await LINK_KEYS.prune(session, now=now, batch_size=batch_size)
