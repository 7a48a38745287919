"""Listing a customer's payment links: the filters, the statuses a reader sees in SQL, sorting,
pages with their total, and the report's counts and sums by day, status and method."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    case,
    func,
    literal,
    select,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.documents import normalize_document
from tucano.core.card_numbers import redact_card_numbers
from tucano.core.clock import clock
from tucano.core.errors import BadRequest
from tucano.core.money import from_cents
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.payment_links import totals
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.reads import LINKS, PAYMENT_VIEW, PAYMENTS, payment_view_of
from tucano.payment_links.schemas import (
    METHOD_CARD,
    METHOD_PIX,
    STATUS_CODES,
    PaymentView,
    StatusName,
)

SORTABLE = {"creationDate", "amount", "payerName", "status"}


@dataclass(frozen=True)
class LinkFilters:
    start: datetime
    end: datetime
    payment_receipt: str | None = None
    status: StatusName | None = None
    payment_method: int | None = None
    registration_number: str | None = None
    user_reference: str | None = None


def effective_status(now: Any) -> ColumnElement[str]:
    """The status a reader sees, in SQL (see schemas.status_at)."""
    return case(
        (PaymentLink.status == "PAID", "PAID"),
        (PaymentLink.expires_at <= now, "EXPIRED"),
        else_="CREATED",
    )


def effective_status_code(now: Any) -> ColumnElement[int]:
    """The code of the status a reader sees (schemas.STATUS_CODES), in SQL."""
    return case(
        (PaymentLink.status == "PAID", STATUS_CODES["PAID"]),
        (PaymentLink.expires_at <= now, STATUS_CODES["EXPIRED"]),
        else_=STATUS_CODES["CREATED"],
    )


def matched_links(customer_id: Any, filters: LinkFilters, now: Any) -> Select[tuple[()]]:
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


def canonical_sort(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`field,asc|desc` (repeatable) as (field, direction) pairs; default creationDate,desc.
    400 for a field that cannot be sorted by, or one named twice."""
    terms: list[tuple[str, str]] = []
    for value in values or ["creationDate,desc"]:
        field, _, direction = value.partition(",")
        field, direction = field.strip(), (direction.strip().lower() or "asc")
        if field not in SORTABLE or direction not in ("asc", "desc"):
            raise BadRequest(
                f"sort must be field,asc or field,desc with field one of "
                f"{', '.join(sorted(SORTABLE))} (got {redact_card_numbers(value)!r})"
            )
        if any(field == named for named, _ in terms):
            # A second term on a field changes nothing, and SQLite caps the terms of an ORDER BY.
            raise BadRequest(f"sort names {field} more than once")
        terms.append((field, direction))
    return tuple(terms)


def parse_sort(values: Sequence[str], now: Any, *, dialect: str) -> list[Any]:
    """The ORDER BY terms of canonical_sort(values), the status as seen `now`."""
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
    order: list[Any] = [
        columns[field].asc() if direction == "asc" else columns[field].desc()
        for field, direction in canonical_sort(values)
    ]
    # The same order on every page, even among equal values.
    order.append(PaymentLink.id.desc())
    return order


# Offsets from which the list counts before it reads a page (see list_links).
DEEP_OFFSET = 10_000


def _bind(name: str, column: Any) -> BindParameter[Any]:
    """A parameter named `name`, bound as `column`'s values are."""
    return bindparam(name, type_=column.type)


# The values of a list's or report's statements, bound per request: each statement is built
# once per shape (which filters, which sort) and run with these (docs/performance.md: building
# the statement and its cache key anew cost more than the database's work).
_CUSTOMER = _bind("customer", LINKS.c.customer_id)
_NOW = _bind("now", LINKS.c.expires_at)
_OFFSET: BindParameter[int] = bindparam("offset")
_LIMIT: BindParameter[int] = bindparam("limit")
_BOUND_FILTERS: dict[str, Any] = {
    "start": _bind("start", LINKS.c.created_at),
    "end": _bind("end", LINKS.c.created_at),
    "payment_receipt": _bind("payment_receipt", PAYMENTS.c.payment_receipt),
    "payment_method": _bind("payment_method", PAYMENTS.c.method),
    "registration_number": _bind("registration_number", LINKS.c.registration_number),
    "user_reference": _bind("user_reference", LINKS.c.user_reference),
}
_DAY = totals.TOTALS.c.day
_BOUND_DAYS = {name: _bind(name, _DAY) for name in ("first", "last", "today")}
_BOUND_MOMENTS = {
    name: _bind(name, LINKS.c.created_at)
    for name in ("first_midnight", "last_midnight", "today_midnight", "tomorrow_midnight")
} | {name: _bind(name, LINKS.c.created_at) for name in ("expiring_from", "expiring_until")}


class _Shape(NamedTuple):
    """What a statement's form depends on; everything else is a bound value."""

    dialect: str
    status: StatusName | None
    given: frozenset[str]  # the optional filters given (their values are bound)
    whole_days: bool  # whether the range holds a whole UTC day (see _tallied)
    sort: tuple[tuple[str, str], ...]


def _shape_and_values(
    dialect: str, customer_id: int, filters: LinkFilters, now: datetime, sort: Sequence[str]
) -> tuple[_Shape, dict[str, Any]]:
    given = frozenset(
        name
        for name in ("payment_receipt", "payment_method", "registration_number", "user_reference")
        if getattr(filters, name) is not None
    )
    values: dict[str, Any] = {
        "customer": customer_id,
        "now": now,
        "start": filters.start,
        "end": filters.end,
        **{name: getattr(filters, name) for name in given},
    }
    if "registration_number" in given:
        values["registration_number"] = normalize_document(str(filters.registration_number))
    first, last = totals.full_days(filters.start, filters.end)
    whole_days = first < last and not given & _LINK_FILTERS
    if whole_days:
        today = now.date()
        values |= {
            "first": first,
            "last": last,
            "today": today,
            "first_midnight": totals.midnight(first),
            "last_midnight": totals.midnight(last),
            "today_midnight": totals.midnight(today),
            "tomorrow_midnight": totals.midnight(today + timedelta(1)),
            "expiring_from": totals.midnight(max(first, today - timedelta(10))),
            "expiring_until": totals.midnight(min(last, today)),
        }
    shape = _Shape(dialect, filters.status, given, whole_days, canonical_sort(sort))
    return shape, values


# The filters that need the links themselves (their indexes), not the day totals.
_LINK_FILTERS = frozenset({"registration_number", "user_reference", "payment_receipt"})


def _bound_filters(shape: _Shape) -> LinkFilters:
    """The filters of `shape` as bound parameters (status, part of the shape, as it is)."""
    return LinkFilters(
        start=_BOUND_FILTERS["start"],
        end=_BOUND_FILTERS["end"],
        status=shape.status,
        **{name: _BOUND_FILTERS[name] for name in shape.given},
    )


class _ListStatements(NamedTuple):
    page: Select[Any]  # the page's links with the matched total beside each
    total: Select[Any]  # the matched total alone


@lru_cache(maxsize=512)
def _list_statements(shape: _Shape) -> _ListStatements:
    filters = _bound_filters(shape)
    order = parse_sort(
        [f"{field},{direction}" for field, direction in shape.sort], _NOW, dialect=shape.dialect
    )
    total = _matched_total(shape, filters)
    ids = (
        matched_links(_CUSTOMER, filters, _NOW)
        .add_columns(PaymentLink.id)
        .order_by(*order)
        .offset(_OFFSET)
        .limit(_LIMIT)
    ).subquery()
    page = (
        select(*LINKS.c, *PAYMENT_VIEW, total.label("matched_total"))
        .join(ids, ids.c.id == LINKS.c.id)
        .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
        .order_by(*order)
    )
    return _ListStatements(page, select(total))


async def list_links(
    database: Database,
    *,
    customer_id: int,
    filters: LinkFilters,
    sort: Sequence[str],
    page: PageRequest,
) -> tuple[list[tuple[Any, PaymentView | None]], int]:
    """One page of the customer's matched links with their payments (rows with the links'
    column names, as `read_link` gives), and how many links match in all. Read through
    SQLAlchemy Core on a read connection: no ORM session, whose machinery costs more here than
    building the rows."""
    shape, values = _shape_and_values(database.dialect, customer_id, filters, clock.now(), sort)
    statements = _list_statements(shape)
    values |= {"offset": page.offset, "limit": page.size}
    async with database.read_engine.connect() as connection:
        if page.offset >= DEEP_OFFSET:
            # Far down, the total first: a page past the end is then answered without stepping
            # over every matching link to find it empty.
            counted = int(await connection.scalar(statements.total, values) or 0)
            if page.offset >= counted:
                return [], counted
        # The page and the total in one statement: one round trip, and on PostgreSQL one
        # snapshot, so a link created or paid meanwhile cannot make them disagree.
        rows = (await connection.execute(statements.page, values)).all()
        if rows:
            return [(row, payment_view_of(row)) for row in rows], int(rows[0].matched_total)
        # Past the last page (or nothing matches): the total alone.
        return [], int(await connection.scalar(statements.total, values) or 0)


class Tally(NamedTuple):
    """Matched links of one UTC day, status (as seen now) and payment method (0: not paid)."""

    day: date
    status: str
    method: int
    links: int
    cents: int


@lru_cache(maxsize=512)
def _tally_statement(shape: _Shape) -> Select[Any]:
    counted = _tallied(shape, _bound_filters(shape))
    return (
        select(
            counted.c.day,
            counted.c.status,
            counted.c.method,
            func.sum(counted.c.links),
            func.sum(counted.c.cents),
        )
        .where(*_tallied_conditions(counted, _bound_filters(shape)))
        .group_by(counted.c.day, counted.c.status, counted.c.method)
    )


async def tally(
    session: AsyncSession, *, customer_id: int, filters: LinkFilters, now: datetime | None = None
) -> list[Tally]:
    """How many links match, and for how much, by day, status and method, in one statement
    (see _tallied)."""
    now = now or clock.now()
    shape, values = _shape_and_values(
        session.get_bind().dialect.name, customer_id, filters, now, ()
    )
    rows = await session.execute(_tally_statement(shape), values)
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


def _matched_total(shape: _Shape, filters: LinkFilters) -> Any:
    """How many links match, as one SQL expression (uncorrelated, to sit beside a page)."""
    counted = _tallied(shape, filters)
    return (
        select(func.coalesce(func.sum(counted.c.links), 0))
        .where(*_tallied_conditions(counted, filters))
        .correlate(None)
        .scalar_subquery()
    )


def _tallied(shape: _Shape, filters: LinkFilters) -> Any:
    """Rows of (day, status, method, links, cents) that add up to the matched links.

    With no filter that needs the links themselves (document, reference, receipt), whole days
    come from the day totals (see totals.py) and only the parts of days at the ends of the range,
    and the CREATED links whose group expires today, are read link by link (docs/adr/
    payment-links.md). Otherwise the matched links are read (their filters have indexes of
    their own). Status and method are filtered by the caller, on these rows."""
    links = LINKS.c
    dialect = shape.dialect
    parts: list[Select[Any]] = []
    if shape.whole_days:
        days, moments = _BOUND_DAYS, _BOUND_MOMENTS
        parts += totals.total_parts(
            dialect,
            customer_id=_CUSTOMER,
            first=days["first"],
            last=days["last"],
            today=days["today"],
        )
        # The CREATED links of groups that expire today (expires_at is in the index).
        parts.append(
            _read_links(
                dialect,
                links.created_at >= moments["expiring_from"],
                links.created_at < moments["expiring_until"],
                links.status == "CREATED",
                links.expires_at >= moments["today_midnight"],
                links.expires_at < moments["tomorrow_midnight"],
                with_payments=False,
            )
        )
        ends = [
            (links.created_at >= filters.start, links.created_at < moments["first_midnight"]),
            (links.created_at >= moments["last_midnight"], links.created_at <= filters.end),
        ]
        parts += [_read_links(dialect, *bounds) for bounds in ends]
    else:
        parts.append(
            _read_links(
                dialect,
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
        document = filters.registration_number
        conditions.append(
            LINKS.c.registration_number
            == (normalize_document(document) if isinstance(document, str) else document)
        )
    if filters.user_reference is not None:
        conditions.append(LINKS.c.user_reference == filters.user_reference)
    if filters.payment_receipt is not None:
        conditions.append(PAYMENTS.c.payment_receipt == filters.payment_receipt)
    return conditions


def _read_links(
    dialect: str, *conditions: ColumnElement[bool], with_payments: bool = True
) -> Select[Any]:
    """Links read one by one (grouped by day, status as seen now, and method)."""
    links = LINKS.c
    day = totals.utc_day(dialect, links.created_at)
    status = effective_status(_NOW)
    method = func.coalesce(PAYMENTS.c.method, totals.UNPAID) if with_payments else literal(0)
    source = LINKS.outerjoin(PAYMENTS, PAYMENTS.c.link_id == links.id) if with_payments else LINKS
    return (
        select(
            day.label("day"),
            status.label("status"),
            method.label("method"),
            func.count().label("links"),
            func.sum(links.amount_cents).label("cents"),
        )
        .select_from(source)
        .where(links.customer_id == _CUSTOMER, *conditions)
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
