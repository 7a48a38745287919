"""Reading a customer's payment links: one for display (coalesced under load on PostgreSQL),
one for a change (as ORM objects), by checkout token or by BR Code txid. EXPIRED is computed at
read time (schemas.status_at)."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple, cast

from sqlalchemy import BigInteger, Table, Uuid, and_, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import asyncpg as postgresql_asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.errors import ErrorCode, NotFound
from tucano.db.compiled_reads import CompiledSqliteRead
from tucano.db.database import Database
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.schemas import PaymentView

# A link and its payment (None until paid), as ORM objects.
_LINK_AND_PAYMENT = select(PaymentLink, Payment).outerjoin(
    Payment, Payment.link_id == PaymentLink.id
)


async def get_link(
    session: AsyncSession, *, customer_id: int, link_uuid: uuid.UUID
) -> tuple[PaymentLink, Payment | None]:
    """The customer's link and its payment, as ORM objects for a change in `session` (paying);
    another customer's link is answered as missing."""
    row = (
        await session.execute(
            _LINK_AND_PAYMENT.where(
                PaymentLink.uuid == link_uuid, PaymentLink.customer_id == customer_id
            )
        )
    ).first()
    if row is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    return row[0], row[1]


async def find_link_for_checkout(
    session: AsyncSession, link_uuid: uuid.UUID
) -> tuple[PaymentLink, Payment | None] | None:
    """A link and its payment by UUID alone, for the checkout page: its caller is the payer,
    whose checkout token (already verified) names the link, not a customer."""
    row = (await session.execute(_LINK_AND_PAYMENT.where(PaymentLink.uuid == link_uuid))).first()
    return None if row is None else (row[0], row[1])


async def find_link_by_txid(
    session: AsyncSession, *, customer_id: int, txid: str
) -> PaymentLink | None:
    """The customer's link whose BR Code carries `txid`, locked until commit (it is paid next)."""
    return await session.scalar(
        select(PaymentLink)
        .where(PaymentLink.pix_txid == txid, PaymentLink.customer_id == customer_id)
        .with_for_update()
    )


LINKS = cast(Table, PaymentLink.__table__)
PAYMENTS = cast(Table, Payment.__table__)
# The payment's columns a reader is shown beside its link's (see payment_view_of).
PAYMENT_VIEW = (
    PAYMENTS.c.method,
    PAYMENTS.c.payment_id,
    PAYMENTS.c.payment_receipt,
    PAYMENTS.c.paid_at,
    PAYMENTS.c.installments,
    PAYMENTS.c.amount_cents.label("payment_amount_cents"),
)
# Built once: the most frequent statement, cheaper to run than to build (docs/adr/payment-links.md).
_READ_LINK = (
    select(*LINKS.c, *PAYMENT_VIEW)
    .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
    .where(LINKS.c.uuid == bindparam("link_uuid"), LINKS.c.customer_id == bindparam("customer"))
)


def payment_view_of(row: Any) -> PaymentView | None:
    """The payment in a row read with PAYMENT_VIEW; None while the link is unpaid."""
    if row.payment_id is None:
        return None
    return PaymentView(
        row.method,
        row.payment_id,
        row.payment_receipt,
        row.paid_at,
        row.installments,
        row.payment_amount_cents,
    )


# The same statement for asyncpg, for many links at once (see _read_links_on_postgres): the
# (link, customer) pairs asked for, as two arrays in order, joined to the links they name.
_WANTED = (
    func.unnest(
        bindparam("link_uuids", type_=ARRAY(Uuid)), bindparam("customers", type_=ARRAY(BigInteger))
    )
    .table_valued("uuid", "customer_id")
    .render_derived(name="wanted")
)
_READ_LINKS_ON_POSTGRES = str(
    select(*LINKS.c, *PAYMENT_VIEW)
    .select_from(
        LINKS.join(
            _WANTED,
            and_(LINKS.c.uuid == _WANTED.c.uuid, LINKS.c.customer_id == _WANTED.c.customer_id),
        )
    )
    .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
    .compile(dialect=postgresql_asyncpg.dialect())  # type: ignore[no-untyped-call]
)
_LinkRow = NamedTuple(  # type: ignore[misc]  # the columns of _READ_LINK, by name
    "_LinkRow", [(column.name, Any) for column in _READ_LINK.selected_columns]
)
_LinkKey = tuple[int, uuid.UUID]  # customer, link
_READ_LINK_ON_SQLITE = CompiledSqliteRead(_READ_LINK, _LinkRow)


async def _read_links_on_postgres(
    database: Database, keys: list[_LinkKey]
) -> dict[_LinkKey, _LinkRow]:
    """The links of `keys` in one statement, straight through asyncpg; a key whose link is
    another customer's finds nothing."""
    async with database.driver_connection() as connection:
        records = await connection.fetch(
            _READ_LINKS_ON_POSTGRES, [key[1] for key in keys], [key[0] for key in keys]
        )
    rows: list[Any] = [_LinkRow(*record) for record in records]
    return {(row.customer_id, row.uuid): row for row in rows}


async def read_link(
    database: Database, *, customer_id: int, link_uuid: uuid.UUID
) -> tuple[Any, PaymentView | None]:
    """The customer's link and its payment, for display (a row with the link's column names,
    read without the ORM); another customer's link is answered as missing. Writers use
    `get_link`. On PostgreSQL, the most frequent request: reads that arrive together under load
    share one statement (db.coalesced.CoalescedLookup), each still seeing every write committed
    before it came."""
    row: Any
    if database.dialect == "postgresql":
        row = await database.coalesced(_read_links_on_postgres).get((customer_id, link_uuid))
    else:
        row = await _READ_LINK_ON_SQLITE.first(
            database.inline_sqlite(), {"link_uuid": link_uuid, "customer": customer_id}
        )
    if row is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    return row, payment_view_of(row)
