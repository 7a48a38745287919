"""Listing a customer's payment links: the filters, the statuses a reader sees in SQL, sorting,
pages with their total, and the report's counts and sums by day, status and method."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Select, case, func, literal, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.documents import normalize_document
from tucano.core.card_numbers import redact_card_numbers
from tucano.core.clock import clock
from tucano.core.errors import BadRequest
from tucano.core.money import from_cents
from tucano.core.paging import PageRequest
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
                f"{', '.join(sorted(SORTABLE))} (got {redact_card_numbers(value)!r})"
            )
        if field in sorted_by:
            # A second term on a field changes nothing, and SQLite caps the terms of an ORDER BY.
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
            select(*LINKS.c, *PAYMENT_VIEW, total.label("matched_total"))
            .join(ids, ids.c.id == LINKS.c.id)
            .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
            .order_by(*order)
        )
    ).all()
    if rows:
        return [(row, payment_view_of(row)) for row in rows], int(rows[0].matched_total)
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
    and the CREATED links whose group expires today, are read link by link (docs/adr/
    payment-links.md). Otherwise the matched links are read (their filters have indexes of
    their own). Status and method are filtered by the caller, on these rows."""
    links = LINKS.c
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
            LINKS.c.registration_number == normalize_document(filters.registration_number)
        )
    if filters.user_reference is not None:
        conditions.append(LINKS.c.user_reference == filters.user_reference)
    if filters.payment_receipt is not None:
        conditions.append(PAYMENTS.c.payment_receipt == filters.payment_receipt)
    return conditions


def _read_links(
    dialect: str,
    customer_id: int,
    now: datetime,
    *conditions: ColumnElement[bool],
    with_payments: bool = True,
) -> Select[Any]:
    """Links read one by one (grouped by day, status as seen `now`, and method)."""
    links = LINKS.c
    day = totals.utc_day(dialect, links.created_at)
    status = effective_status(now)
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
