"""Payment links of one customer: create (idempotently), read, list, report; pay; sandbox
auto-payment. Every query takes the caller's customer; EXPIRED is computed at read time."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Table,
    Uuid,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import asyncpg as postgresql_asyncpg
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tucano import wire
from tucano.brazil.documents import normalize_document
from tucano.brazil.pix import SANDBOX_ISPB, new_br_code_txid, new_end_to_end_id
from tucano.card_numbers import shown
from tucano.clock import clock, format_utc
from tucano.db import Database
from tucano.deliveries import outbox as deliveries
from tucano.errors import BadRequest, Conflict, ErrorCode, NotFound
from tucano.money import from_cents, to_cents
from tucano.pagination import PageRequest
from tucano.payment_links import totals
from tucano.payment_links.installments import split_into_installments
from tucano.payment_links.models import IdempotencyKey, Payment, PaymentLink
from tucano.payment_links.schemas import (
    METHOD_CARD,
    METHOD_NAMES,
    METHOD_PIX,
    STATUS_CODES,
    PaymentLinkCreate,
    PaymentMethod,
    PaymentView,
    StatusName,
    expiration_of,
    status_at,
)
from tucano.webhooks.events import EventType
from tucano.webhooks.payloads import PaymentLinkInbound

IDEMPOTENCY_WINDOW = timedelta(hours=24)
SORTABLE = {"creationDate", "amount", "payerName", "status"}


# --- create ---------------------------------------------------------------------------------


def request_fingerprint(data: PaymentLinkCreate) -> str:
    """The same request, whatever its spelling (10.5 or 10.50, punctuation in the document)."""
    canonical = wire.dumps(data.model_dump(mode="python", by_alias=True))
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class IdempotencyRef:
    """An x-transaction-id of a customer, and the fingerprint of the request it came with."""

    customer_id: int
    key: uuid.UUID
    fingerprint: str


def _conflict() -> Conflict:
    return Conflict(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "this x-transaction-id created a payment link with a different body in the last "
        "24 hours; send a new UUID for a new link",
    )


async def find_replay(session: AsyncSession, ref: IdempotencyRef) -> bytes | None:
    """The stored answer for this x-transaction-id if it was used with the same request in the
    last 24 hours; 409 if it was used with another request; None if it is new."""
    stored = await session.scalar(
        select(IdempotencyKey).where(
            IdempotencyKey.customer_id == ref.customer_id,
            IdempotencyKey.key == ref.key,
            IdempotencyKey.created_at > clock.now() - IDEMPOTENCY_WINDOW,
        )
    )
    if stored is None:
        return None
    if stored.request_hash != ref.fingerprint:
        raise _conflict()
    return stored.response.encode()


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


# PostgreSQL: the idempotency key and the link in one statement (in autocommit, so atomic by
# itself). The key goes in unless a live one holds its place (an expired one is taken over);
# the link goes in only if the key did. No link: the caller reads what the key holds.
_LINK_COLUMNS = (
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
_CREATE_ON_POSTGRES = f"""
WITH key AS (
    INSERT INTO payment_link_idempotency_keys AS k
        (customer_id, key, request_hash, response, created_at)
    VALUES ($2, $16, $17, $18, $12)
    ON CONFLICT (customer_id, key) DO UPDATE
       SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
           created_at = EXCLUDED.created_at
     WHERE k.created_at <= $19
    RETURNING 1
), link AS (
    INSERT INTO payment_links ({", ".join(_LINK_COLUMNS)})
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
     WHERE EXISTS (SELECT 1 FROM key)
    RETURNING 1
), counted AS (
    INSERT INTO payment_link_day_changes ({", ".join(totals.KEY)}, link_count, amount_cents)
    SELECT $2, $20, $9, 'CREATED', {totals.UNPAID}, 1, $5 WHERE EXISTS (SELECT 1 FROM link)
)
SELECT count(*) FROM link
"""  # noqa: S608 - our own column names
_STORED_ANSWER = """
SELECT request_hash, response FROM payment_link_idempotency_keys
 WHERE customer_id = $1 AND key = $2 AND created_at > $3
"""


async def create_link(
    database: Database, *, ref: IdempotencyRef, link: PaymentLink, response: bytes
) -> bytes:
    """Store `link` with `response` as the answer to its x-transaction-id, and return the
    answer to send: `response`, or, when the x-transaction-id was used in the last 24 hours,
    the answer it had then (409 if that was for a different request). One link per key, even
    when requests with the same key race."""
    window_start = link.created_at - IDEMPOTENCY_WINDOW
    if database.dialect == "postgresql":
        async with database.driver_connection() as connection:
            created = await connection.fetchval(
                _CREATE_ON_POSTGRES,
                *(getattr(link, name) for name in _LINK_COLUMNS),
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
                    _STORED_ANSWER, ref.customer_id, ref.key, window_start
                )
            )
        if created:
            return response
        if stored is None:  # the key expired in between: a new request after all
            return await create_link(database, ref=ref, link=link, response=response)
        if stored["request_hash"] != ref.fingerprint:
            raise _conflict()
        return str(stored["response"]).encode()
    async with database.session() as session:
        replay = await find_replay(session, ref)
        if replay is not None:
            return replay
        session.add(link)
        await session.flush()
        await totals.record_created(session, link)
        try:
            await remember_response(session, ref, response)
            await session.commit()
        except IntegrityError:
            # A concurrent request with the same x-transaction-id won: answer as it did.
            await session.rollback()
            replay = await find_replay(session, ref)
            if replay is None:
                raise
            return replay
    return response


async def remember_response(session: AsyncSession, ref: IdempotencyRef, body: bytes) -> None:
    """Keep the answer of a create for replays. Raises IntegrityError when a concurrent request
    with the same key got there first (the caller rolls back and replays theirs)."""
    now = clock.now()
    await session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.customer_id == ref.customer_id,
            IdempotencyKey.key == ref.key,
            IdempotencyKey.created_at <= now - IDEMPOTENCY_WINDOW,
        )
    )
    session.add(
        IdempotencyKey(
            customer_id=ref.customer_id,
            key=ref.key,
            request_hash=ref.fingerprint,
            response=body.decode(),
            created_at=now,
        )
    )
    await session.flush()


async def prune_idempotency_keys(
    session: AsyncSession, *, now: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of keys older than their window (the runner calls again while there are
    more: after a long stop there may be millions, and one DELETE of them all held SQLite's
    write lock past other writers' patience)."""
    k = IdempotencyKey
    expired = (
        select(k.id)
        .where(k.created_at <= now - IDEMPOTENCY_WINDOW)
        .order_by(k.created_at)
        .limit(batch_size)
    )
    result = await session.execute(delete(k).where(k.id.in_(expired.scalar_subquery())))
    return int(getattr(result, "rowcount", 0) or 0)


# --- read -------------------------------------------------------------------------------------


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


_LINKS = cast(Table, PaymentLink.__table__)
_PAYMENTS = cast(Table, Payment.__table__)
_PAYMENT_VIEW = (
    _PAYMENTS.c.method,
    _PAYMENTS.c.payment_id,
    _PAYMENTS.c.payment_receipt,
    _PAYMENTS.c.paid_at,
    _PAYMENTS.c.installments,
    _PAYMENTS.c.amount_cents.label("payment_amount_cents"),
)
# Built once: a read is the most frequent operation, and building and keying a statement costs
# more than running it.
_READ_LINK = (
    select(*_LINKS.c, *_PAYMENT_VIEW)
    .outerjoin(_PAYMENTS, _PAYMENTS.c.link_id == _LINKS.c.id)
    .where(_LINKS.c.uuid == bindparam("link_uuid"), _LINKS.c.customer_id == bindparam("customer"))
)


def _payment_of(row: Any) -> PaymentView | None:
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
    select(*_LINKS.c, *_PAYMENT_VIEW)
    .select_from(
        _LINKS.join(
            _WANTED,
            and_(_LINKS.c.uuid == _WANTED.c.uuid, _LINKS.c.customer_id == _WANTED.c.customer_id),
        )
    )
    .outerjoin(_PAYMENTS, _PAYMENTS.c.link_id == _LINKS.c.id)
    .compile(dialect=postgresql_asyncpg.dialect())  # type: ignore[no-untyped-call]
)
_LinkRow = NamedTuple(  # type: ignore[misc]  # the columns of _READ_LINK, by name
    "_LinkRow", [(column.name, Any) for column in _READ_LINK.selected_columns]
)
_LinkKey = tuple[int, uuid.UUID]  # customer, link


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
    share one statement (db.CoalescedLookup), each still seeing every write committed before it
    came."""
    row: Any
    if database.dialect == "postgresql":
        row = await database.coalesced(_read_links_on_postgres).get((customer_id, link_uuid))
    else:
        async with database.read_engine.connect() as connection:
            row = (
                await connection.execute(
                    _READ_LINK, {"link_uuid": link_uuid, "customer": customer_id}
                )
            ).first()
    if row is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    return row, _payment_of(row)


@dataclass(frozen=True)
class LinkFilters:
    start: datetime
    end: datetime
    payment_receipt: str | None = None
    status: StatusName | None = None
    payment_method: int | None = None
    registration_number: str | None = None
    user_reference: str | None = None


def effective_status(now: datetime) -> ColumnElement[str]:
    """The status a reader sees, in SQL (see schemas.status_at)."""
    return case(
        (PaymentLink.status == "PAID", "PAID"),
        (PaymentLink.expires_at <= now, "EXPIRED"),
        else_="CREATED",
    )


def effective_status_code(now: datetime) -> ColumnElement[int]:
    """The code of the status a reader sees (schemas.STATUS_CODES), in SQL."""
    return case(
        (PaymentLink.status == "PAID", STATUS_CODES["PAID"]),
        (PaymentLink.expires_at <= now, STATUS_CODES["EXPIRED"]),
        else_=STATUS_CODES["CREATED"],
    )


def matched_links(customer_id: int, filters: LinkFilters, now: datetime) -> Select[tuple[()]]:
    """FROM and WHERE of the links a page or the CSV covers. Payments are joined only when a
    filter is about them (then inner: only paid links have one)."""
    query = (
        select()
        .select_from(PaymentLink)
        .where(
            PaymentLink.customer_id == customer_id,
            PaymentLink.created_at >= filters.start,
            PaymentLink.created_at <= filters.end,
            *_link_conditions(filters),
        )
    )
    if filters.status == "PAID":
        query = query.where(PaymentLink.status == "PAID")
    elif filters.status == "CREATED":
        query = query.where(PaymentLink.status == "CREATED", PaymentLink.expires_at > now)
    elif filters.status == "EXPIRED":
        query = query.where(PaymentLink.status == "CREATED", PaymentLink.expires_at <= now)
    if filters.payment_receipt is not None or filters.payment_method is not None:
        query = query.join(Payment, Payment.link_id == PaymentLink.id)
        if filters.payment_method is not None:
            query = query.where(Payment.method == filters.payment_method)
    return query


def parse_sort(values: Sequence[str], now: datetime, *, dialect: str) -> list[Any]:
    """`field,asc|desc` (repeatable) into ORDER BY terms; default creationDate,desc."""
    columns = {
        "creationDate": PaymentLink.created_at,
        "amount": PaymentLink.amount_cents,
        # By code point on both databases, as SQLite's BINARY does, rather than by whatever
        # collation a PostgreSQL database was created with.
        "payerName": (
            PaymentLink.payer_name.collate("C")
            if dialect == "postgresql"
            else PaymentLink.payer_name
        ),
        # By the status code a reader sees (1 CREATED, 2 PAID, 3 EXPIRED), not by its name.
        "status": effective_status_code(now),
    }
    order: list[Any] = []
    sorted_by: set[str] = set()
    for value in values or ["creationDate,desc"]:
        field, _, direction = value.partition(",")
        field, direction = field.strip(), (direction.strip().lower() or "asc")
        if field not in columns or direction not in ("asc", "desc"):
            raise BadRequest(
                f"sort must be field,asc or field,desc with field one of "
                f"{', '.join(sorted(SORTABLE))} (got {shown(value)!r})"
            )
        if field in sorted_by:
            # A second term on a field changes nothing, and thousands of them made SQLite
            # refuse the statement ("too many terms in ORDER BY").
            raise BadRequest(f"sort names {field} more than once")
        sorted_by.add(field)
        order.append(columns[field].asc() if direction == "asc" else columns[field].desc())
    # The same order on every page, even among equal values.
    order.append(PaymentLink.id.desc())
    return order


# Offsets from which the list counts before it reads a page (see list_links).
DEEP_OFFSET = 10_000


async def list_links(
    session: AsyncSession,
    *,
    customer_id: int,
    filters: LinkFilters,
    sort: Sequence[str],
    page: PageRequest,
) -> tuple[list[tuple[Any, PaymentView | None]], int]:
    """One page of the customer's matched links with their payments (rows with the links'
    column names, as `read_link` gives), and how many links match in all."""
    now = clock.now()
    dialect = session.get_bind().dialect.name
    order = parse_sort(sort, now, dialect=dialect)
    total = _matched_total(dialect, customer_id, filters, now)
    if page.offset >= DEEP_OFFSET:
        # Far down, the total first: a page past the end is then answered without stepping
        # over every matching link to find it empty.
        counted = int(await session.scalar(select(total)) or 0)
        if page.offset >= counted:
            return [], counted
    ids = (
        matched_links(customer_id, filters, now)
        .add_columns(PaymentLink.id)
        .order_by(*order)
        .offset(page.offset)
        .limit(page.size)
    ).subquery()
    # The page and the total in one statement: one round trip, and on PostgreSQL one snapshot,
    # so a link created or paid meanwhile cannot make them disagree.
    rows = (
        await session.execute(
            select(*_LINKS.c, *_PAYMENT_VIEW, total.label("matched_total"))
            .join(ids, ids.c.id == _LINKS.c.id)
            .outerjoin(_PAYMENTS, _PAYMENTS.c.link_id == _LINKS.c.id)
            .order_by(*order)
        )
    ).all()
    if rows:
        return [(row, _payment_of(row)) for row in rows], int(rows[0].matched_total)
    # Past the last page (or nothing matches): the total alone.
    return [], int(await session.scalar(select(total)) or 0)


class Tally(NamedTuple):
    """Matched links of one UTC day, status (as seen now) and payment method (0: not paid)."""

    day: date
    status: str
    method: int
    links: int
    cents: int


async def tally(
    session: AsyncSession, *, customer_id: int, filters: LinkFilters, now: datetime | None = None
) -> list[Tally]:
    """How many links match, and for how much, by day, status and method, in one statement
    (see _tallied)."""
    now = now or clock.now()
    counted = _tallied(session.get_bind().dialect.name, customer_id, filters, now)
    rows = await session.execute(
        select(
            counted.c.day,
            counted.c.status,
            counted.c.method,
            func.sum(counted.c.links),
            func.sum(counted.c.cents),
        )
        .where(*_tallied_conditions(counted, filters))
        .group_by(counted.c.day, counted.c.status, counted.c.method)
    )
    return [
        Tally(day, status, method, int(count), int(cents))
        for day, status, method, count, cents in rows
        if count
    ]


def _tallied_conditions(counted: Any, filters: LinkFilters) -> list[ColumnElement[bool]]:
    """The status and method filters, on the rows of _tallied."""
    conditions = []
    if filters.status is not None:
        conditions.append(counted.c.status == filters.status)
    if filters.payment_method is not None:
        conditions.append(counted.c.method == filters.payment_method)
    return conditions


def _matched_total(dialect: str, customer_id: int, filters: LinkFilters, now: datetime) -> Any:
    """How many links match, as one SQL expression (uncorrelated, to sit beside a page)."""
    counted = _tallied(dialect, customer_id, filters, now)
    return (
        select(func.coalesce(func.sum(counted.c.links), 0))
        .where(*_tallied_conditions(counted, filters))
        .correlate(None)
        .scalar_subquery()
    )


def _tallied(dialect: str, customer_id: int, filters: LinkFilters, now: datetime) -> Any:
    """Rows of (day, status, method, links, cents) that add up to the matched links.

    With no filter that needs the links themselves (document, reference, receipt), whole days
    come from the day totals (see totals.py) and only the parts of days at the ends of the range,
    and the CREATED links whose group expires today, are read link by link: a year of a million
    links is a few thousand total rows. Otherwise the matched links are read (their filters have
    indexes of their own). Status and method are filtered by the caller, on these rows."""
    links = _LINKS.c
    parts: list[Select[Any]] = []
    if (
        filters.registration_number is None
        and filters.user_reference is None
        and filters.payment_receipt is None
    ):
        first, last = totals.full_days(filters.start, filters.end)
        if first < last:
            today = now.date()
            parts += totals.total_parts(
                dialect, customer_id=customer_id, first=first, last=last, today=today
            )
            # The CREATED links of groups that expire today (expires_at is in the index).
            parts.append(
                _read_links(
                    dialect,
                    customer_id,
                    now,
                    links.created_at >= totals.midnight(max(first, today - timedelta(10))),
                    links.created_at < totals.midnight(min(last, today)),
                    links.status == "CREATED",
                    links.expires_at >= totals.midnight(today),
                    links.expires_at < totals.midnight(today + timedelta(1)),
                    with_payments=False,
                )
            )
            ends = [
                (links.created_at >= filters.start, links.created_at < totals.midnight(first)),
                (links.created_at >= totals.midnight(last), links.created_at <= filters.end),
            ]
        else:
            ends = [(links.created_at >= filters.start, links.created_at <= filters.end)]
        parts += [_read_links(dialect, customer_id, now, *bounds) for bounds in ends]
    else:
        parts.append(
            _read_links(
                dialect,
                customer_id,
                now,
                links.created_at >= filters.start,
                links.created_at <= filters.end,
                *_link_conditions(filters),
            )
        )
    return union_all(*parts).subquery()


def _link_conditions(filters: LinkFilters) -> list[ColumnElement[bool]]:
    """The filters that are about the link's own fields or its payment (not status or range)."""
    conditions = []
    if filters.registration_number is not None:
        conditions.append(
            _LINKS.c.registration_number == normalize_document(filters.registration_number)
        )
    if filters.user_reference is not None:
        conditions.append(_LINKS.c.user_reference == filters.user_reference)
    if filters.payment_receipt is not None:
        conditions.append(_PAYMENTS.c.payment_receipt == filters.payment_receipt)
    return conditions


def _read_links(
    dialect: str,
    customer_id: int,
    now: datetime,
    *conditions: ColumnElement[bool],
    with_payments: bool = True,
) -> Select[Any]:
    """Links read one by one (grouped by day, status as seen `now`, and method)."""
    links = _LINKS.c
    day = totals.utc_day(dialect, links.created_at)
    status = effective_status(now)
    method = func.coalesce(_PAYMENTS.c.method, totals.UNPAID) if with_payments else literal(0)
    source = (
        _LINKS.outerjoin(_PAYMENTS, _PAYMENTS.c.link_id == links.id) if with_payments else _LINKS
    )
    return (
        select(
            day.label("day"),
            status.label("status"),
            method.label("method"),
            func.count().label("links"),
            func.sum(links.amount_cents).label("cents"),
        )
        .select_from(source)
        .where(links.customer_id == customer_id, *conditions)
        .group_by(day, status, method)
    )


async def report(
    session: AsyncSession, *, customer_id: int, filters: LinkFilters
) -> dict[str, Any]:
    """Counts and sums over every matched link, computed by the database (see `tally`)."""
    by_status: dict[str, list[int]] = {name: [0, 0] for name in ("CREATED", "PAID", "EXPIRED")}
    by_method: dict[int, list[int]] = {METHOD_CARD: [0, 0], METHOD_PIX: [0, 0]}
    by_day: dict[date, list[int]] = {}
    for row in await tally(session, customer_id=customer_id, filters=filters):
        sums = [by_status[row.status], by_day.setdefault(row.day, [0, 0])]
        if row.method in by_method:
            sums.append(by_method[row.method])
        for counted in sums:
            counted[0] += row.links
            counted[1] += row.cents
    return {
        "start_date": filters.start,
        "end_date": filters.end,
        "total_count": sum(count for count, _ in by_status.values()),
        "total_amount": from_cents(sum(cents for _, cents in by_status.values())),
        "by_status": [
            {"status": name, "count": count, "amount": from_cents(cents)}
            for name, (count, cents) in by_status.items()
        ],
        "by_payment_method": [
            {"payment_method": method, "count": count, "amount": from_cents(cents)}
            for method, (count, cents) in by_method.items()
        ],
        "by_day": [
            {"date": day.isoformat(), "count": count, "amount": from_cents(cents)}
            for day, (count, cents) in sorted(by_day.items())
        ],
    }


CSV_COLUMNS = [
    "linkPaymentUuid",
    "creationDate",
    "expirationDate",
    "status",
    "payerName",
    "registrationNumber",
    "amount",
    "numbersInstallments",
    "description",
    "userReference",
    "paymentMethod",
    "paymentId",
    "paymentReceipt",
    "paymentDate",
    "installments",
]


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A separator a spreadsheet may split on (`;` in pt-BR Excel, whatever the file's own is, and
# quotes do not protect it there) followed by what would start a formula in the next cell.
_FORMULA_AFTER_SEPARATOR = re.compile(r"([,;\t])(?=[=+\-@\t\r])")


def _csv_safe(value: object) -> str:
    """A cell as text; what a spreadsheet would run as a formula, at the start of the cell or
    after a separator it may split the cell on, gets a leading quote."""
    text = "" if value is None else str(value)
    if any(separator in text for separator in ",;\t"):
        text = _FORMULA_AFTER_SEPARATOR.sub(r"\1'", text)
    return "'" + text if text.startswith(_FORMULA_START) else text


CSV_CHUNK = 1000


async def stream_csv(
    database: Database, *, customer_id: int, filters: LinkFilters
) -> AsyncIterator[str]:
    """Every matched link as CSV, newest first, read in chunks of CSV_CHUNK links, each in a
    short read of its own: a client that reads slowly holds no database connection (nor, on
    SQLite, the database's lock) while the file streams. Statuses are as of the first chunk; a
    link paid while the file streams may show either way."""
    now = clock.now()
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    last: tuple[datetime, int] | None = None
    while True:
        matched = matched_links(customer_id, filters, now)
        if last is not None:
            matched = matched.where(tuple_(PaymentLink.created_at, PaymentLink.id) < last)
        newest_first = (PaymentLink.created_at.desc(), PaymentLink.id.desc())
        chunk = (
            matched.add_columns(PaymentLink.id).order_by(*newest_first).limit(CSV_CHUNK)
        ).subquery()
        rows = await _read_whole(
            database,
            select(*_LINKS.c, *_PAYMENT_VIEW)
            .join(chunk, chunk.c.id == _LINKS.c.id)
            .outerjoin(_PAYMENTS, _PAYMENTS.c.link_id == _LINKS.c.id)
            .order_by(_LINKS.c.created_at.desc(), _LINKS.c.id.desc()),
        )
        if not rows:
            return
        buffer.seek(0)
        buffer.truncate()
        for link in rows:
            payment = _payment_of(link)
            writer.writerow(
                [
                    _csv_safe(v)
                    for v in (
                        link.uuid,
                        format_utc(link.created_at),
                        format_utc(link.expires_at),
                        status_at(link, now),
                        link.payer_name,
                        link.registration_number,
                        f"{from_cents(link.amount_cents):.2f}",
                        link.numbers_installments,
                        link.description,
                        link.user_reference,
                        payment.method if payment else None,
                        payment.payment_id if payment else None,
                        payment.payment_receipt if payment else None,
                        format_utc(payment.paid_at) if payment else None,
                        payment.installments if payment else None,
                    )
                ]
            )
        yield buffer.getvalue()
        if len(rows) < CSV_CHUNK:
            return
        last = (rows[-1].created_at, rows[-1].id)


async def _read_whole(database: Database, statement: Select[Any]) -> list[Any]:
    """`statement`'s rows, read to the end even if the caller is cancelled meanwhile.

    A streamed response is cancelled when its client goes away. Cancelled in the middle of a
    statement, aiosqlite's connection was abandoned inside its transaction, which on SQLite
    holds the database's write lock (see db._on_begin): every write then waited and failed.
    Shielded, the read finishes and its session closes normally; the stream stops after it."""

    async def read() -> list[Any]:
        async with database.read_session() as session:
            return list(await session.execute(statement))

    task = asyncio.ensure_future(read())
    # Nobody may wait for the result any more: still collect a failure, so it is not reported
    # as never retrieved.
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return await asyncio.shield(task)


# --- payments --------------------------------------------------------------------------------


async def pay_link(
    session: AsyncSession,
    *,
    link: PaymentLink,
    method: int,
    installments: int = 1,
    receipt: str | None = None,
) -> Payment:
    """Record the payment of a link and publish its PAYMENT_LINK_INBOUND, in the caller's
    transaction. Refused (409) unless the link is CREATED and not expired; for a card, the
    instalments must be among those offered and their amounts add up to the link's exactly."""
    now = clock.now()
    if method not in (METHOD_CARD, METHOD_PIX):
        raise BadRequest("paymentMethod must be 1 (credit card) or 2 (PIX)")
    if method == METHOD_PIX:
        installments = 1
    elif not 1 <= installments <= min(link.numbers_installments, link.amount_cents):
        # Offered (installmentsOptions) and at least a cent each: 0.02 is never charged in three.
        raise BadRequest(
            "installments must be between 1 and "
            f"{min(link.numbers_installments, link.amount_cents)} for this link"
        )
    # The guard and the change in one statement, so two payments can never both succeed.
    paid = await session.execute(
        update(PaymentLink)
        .where(
            PaymentLink.id == link.id,
            PaymentLink.status == "CREATED",
            PaymentLink.expires_at > now,
        )
        .values(status="PAID", autopay_at=None)
        .execution_options(synchronize_session=False)
    )
    if getattr(paid, "rowcount", 0) != 1:
        await session.refresh(link)
        current = status_at(link, now)
        raise Conflict(
            ErrorCode.PAYMENT_LINK_NOT_PAYABLE, f"the payment link is {current}, not CREATED"
        )
    link.status = "PAID"
    link.autopay_at = None
    if receipt is None:
        receipt = (
            new_end_to_end_id(ispb=SANDBOX_ISPB, at=now)
            if method == METHOD_PIX
            else f"{secrets.randbelow(10**9):09d}"
        )
    payment = Payment(
        link_id=link.id,
        customer_id=link.customer_id,
        method=method,
        payment_id="pay_" + uuid.uuid4().hex[:24],
        payment_receipt=receipt,
        installments=installments,
        amount_cents=link.amount_cents,
        installment_cents=(
            ",".join(str(c) for c in split_into_installments(link.amount_cents, installments))
            if method == METHOD_CARD
            else None
        ),
        paid_at=now,
    )
    session.add(payment)
    await session.flush()
    await totals.record_paid(session, link, method=method)
    await deliveries.publish_event(
        session,
        customer_id=link.customer_id,
        event_type=EventType.PAYMENT_LINK_INBOUND,
        payload=PaymentLinkInbound(
            payment_link_uuid=str(link.uuid),
            payment_date=now,
            payment_method=METHOD_NAMES[PaymentMethod(method)],
            payment_id=payment.payment_id,
            payment_receipt=receipt,
            amount=from_cents(link.amount_cents),
            user_reference=link.user_reference,
            numbers_installments=installments if method == METHOD_CARD else None,
            status="PAID",
        ),
    )
    return payment


async def run_due_autopayments(session: AsyncSession, *, limit: int = 100) -> int:
    """Sandbox: pay by PIX every link whose automatic payment is due. Durable: the due time is
    a column, so a link created just before a stop is paid once the service runs again."""
    now = clock.now()
    due = (
        select(PaymentLink)
        .where(PaymentLink.autopay_at.is_not(None), PaymentLink.autopay_at <= now)
        .order_by(PaymentLink.autopay_at)
        .limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    links = list(await session.scalars(due))
    paid = 0
    for link in links:
        if link.status == "CREATED" and now < link.expires_at:
            await pay_link(session, link=link, method=METHOD_PIX)
            paid += 1
        else:
            link.autopay_at = None
    await session.flush()
    return paid
