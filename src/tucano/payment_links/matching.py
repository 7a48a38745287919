"""Which of a customer's links a list, a report or a CSV covers, in SQL: the status a reader
sees, the filters and the sort, and the shapes statements are built once for (whose values are
bound per request). Counts and sums come from the day totals (totals_repository) where the
filters allow, and from the links themselves otherwise. The repositories' own (listing_repository
runs them)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Date,
    Select,
    Table,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    null,
    select,
    union_all,
)

from tucano.brazil.brasilia_time import brasilia_date
from tucano.brazil.documents import normalize_document
from tucano.payment_links import totals_repository as totals
from tucano.payment_links.domain import SETTLED_STATUSES, STATUS_CODES, StatusName
from tucano.payment_links.filters import (
    LinkFilters,
    canonical_sort,
    full_days,
    midnight,
    steady_days,
)
from tucano.payment_links.models import Payment, PaymentLink, Refund

LINKS = cast(Table, PaymentLink.__table__)
PAYMENTS = cast(Table, Payment.__table__)


def effective_status(now: Any) -> ColumnElement[str]:
    """The status a reader sees (domain.status_at), in SQL."""
    return case(
        (PaymentLink.status != "CREATED", PaymentLink.status),
        (PaymentLink.expires_at <= now, "EXPIRED"),
        else_="CREATED",
    )


def _effective_status_code(now: Any) -> ColumnElement[int]:
    return case(
        *((PaymentLink.status == name, STATUS_CODES[name]) for name in SETTLED_STATUSES),
        (PaymentLink.expires_at <= now, STATUS_CODES["EXPIRED"]),
        else_=STATUS_CODES["CREATED"],
    )


def _link_conditions(filters: LinkFilters) -> list[ColumnElement[bool]]:
    """The filters about the link's own fields or its payment (not status or range)."""
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
    if filters.status in SETTLED_STATUSES:
        query = query.where(PaymentLink.status == filters.status)
    elif filters.status == "CREATED":
        query = query.where(PaymentLink.status == "CREATED", PaymentLink.expires_at > now)
    elif filters.status == "EXPIRED":
        query = query.where(PaymentLink.status == "CREATED", PaymentLink.expires_at <= now)
    if filters.payment_receipt is not None or filters.payment_method is not None:
        query = query.join(Payment, Payment.link_id == PaymentLink.id)
        if filters.payment_method is not None:
            query = query.where(Payment.method == filters.payment_method)
    return query


def order_by(sort: Sequence[tuple[str, str]], now: Any, *, on_postgresql: bool) -> list[Any]:
    """The ORDER BY terms of a canonical sort, the status as seen `now`."""
    columns = {
        "creationDate": PaymentLink.created_at,
        "amount": PaymentLink.amount_cents,
        # By code point on both databases, as SQLite's BINARY does, rather than by whatever
        # collation a PostgreSQL database was created with.
        "payerName": (
            PaymentLink.payer_name.collate("C") if on_postgresql else PaymentLink.payer_name
        ),
        # By the status code a reader sees (1 CREATED to 5 REFUNDED), not by its name.
        "status": _effective_status_code(now),
    }
    order: list[Any] = [
        columns[field].asc() if direction == "asc" else columns[field].desc()
        for field, direction in sort
    ]
    # The same order on every page, even among equal values.
    order.append(PaymentLink.id.desc())
    return order


def _bind(name: str, column: Any) -> BindParameter[Any]:
    """A parameter named `name`, bound as `column`'s values are."""
    return bindparam(name, type_=column.type)


CUSTOMER = _bind("customer", LINKS.c.customer_id)
NOW = _bind("now", LINKS.c.expires_at)
OFFSET: BindParameter[int] = bindparam("offset")
LIMIT: BindParameter[int] = bindparam("limit")
_BOUND_FILTERS: dict[str, Any] = {
    "start": _bind("start", LINKS.c.created_at),
    "end": _bind("end", LINKS.c.created_at),
    "payment_receipt": _bind("payment_receipt", PAYMENTS.c.payment_receipt),
    "payment_method": _bind("payment_method", PAYMENTS.c.method),
    "registration_number": _bind("registration_number", LINKS.c.registration_number),
    "user_reference": _bind("user_reference", LINKS.c.user_reference),
}
_DAY = totals.TOTALS.c.day
_BOUND_DAYS = {
    name: _bind(name, _DAY) for name in ("first", "last", "expiring_first", "expiring_last")
}
_BOUND_MOMENTS = {
    name: _bind(name, LINKS.c.created_at)
    for name in (
        *("first_midnight", "last_midnight", "expires_from", "expires_until"),
        *("expiring_from", "expiring_until"),
    )
}
# The longest validity of a link, in days (schemas: 1 to 10).
LONGEST_VALIDITY = 10
# The filters that need the links themselves (their indexes), not the day totals.
_LINK_FILTERS = frozenset({"registration_number", "user_reference", "payment_receipt"})


class Shape(NamedTuple):
    """What a statement's form depends on; everything else is a bound value."""

    on_postgresql: bool
    status: StatusName | None
    given: frozenset[str]  # the optional filters given (their values are bound)
    whole_days: bool  # whether the range holds a whole Brasília day (see tallied)
    sort: tuple[tuple[str, str], ...]


def shape_and_values(
    on_postgresql: bool,
    customer_id: int,
    filters: LinkFilters,
    now: datetime,
    sort: Sequence[str],
) -> tuple[Shape, dict[str, Any]]:
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
    first, last = full_days(filters.start, filters.end)
    whole_days = first < last and not given & _LINK_FILTERS
    if whole_days:
        today = brasilia_date(now)
        # Groups of links (day created, validity) whose links may expire around now are read
        # link by link: those that expire today, and, where a daylight-saving change makes a
        # day 23 or 25 hours long (Brazil had them until 2019), those of the days either side.
        near = timedelta(0 if steady_days(today - timedelta(LONGEST_VALIDITY + 2), today) else 1)
        expiring_first, expiring_last = today - near, today + near
        values |= {
            "first": first,
            "last": last,
            "expiring_first": expiring_first,
            "expiring_last": expiring_last,
            "first_midnight": midnight(first),
            "last_midnight": midnight(last),
            "expires_from": midnight(expiring_first - near),
            "expires_until": midnight(expiring_last + near + timedelta(1)),
            "expiring_from": midnight(max(first, expiring_first - timedelta(LONGEST_VALIDITY))),
            "expiring_until": midnight(min(last, expiring_last)),
        }
    shape = Shape(on_postgresql, filters.status, given, whole_days, canonical_sort(sort))
    return shape, values


def bound_filters(shape: Shape) -> LinkFilters:
    """The filters of `shape` as bound parameters (status, part of the shape, as it is)."""
    return LinkFilters(
        start=_BOUND_FILTERS["start"],
        end=_BOUND_FILTERS["end"],
        status=shape.status,
        **{name: _BOUND_FILTERS[name] for name in shape.given},
    )


def tallied_conditions(counted: Any, filters: LinkFilters) -> list[ColumnElement[bool]]:
    """The status and method filters, on the rows of tallied."""
    conditions = []
    if filters.status is not None:
        conditions.append(counted.c.status == filters.status)
    if filters.payment_method is not None:
        conditions.append(counted.c.method == filters.payment_method)
    return conditions


def matched_total(shape: Shape, filters: LinkFilters) -> Any:
    """How many links match, as one SQL expression (uncorrelated, to sit beside a page)."""
    counted = tallied(shape, filters)
    return (
        select(func.coalesce(func.sum(counted.c.links), 0))
        .where(*tallied_conditions(counted, filters))
        .correlate(None)
        .scalar_subquery()
    )


def given_back(filters: LinkFilters) -> Select[Any]:
    """What SUCCEEDED refunds of the matched links gave back, by status (as seen now) and
    payment method, in the columns of a report's rows: (day NULL, status, method, 0 links,
    0 cents, refunded cents). Read from the refunds, which are few beside the links."""
    status = effective_status(NOW)
    return (
        matched_links(CUSTOMER, filters, NOW)
        .join(Refund, Refund.link_id == PaymentLink.id)
        .where(Refund.customer_id == CUSTOMER, Refund.status == "SUCCEEDED")
        .add_columns(
            null().cast(Date),
            status,
            Refund.method,
            literal_column("0"),
            literal_column("0"),
            func.sum(Refund.amount_cents),
        )
        .group_by(status, Refund.method)
    )


def tallied(shape: Shape, filters: LinkFilters) -> Any:
    """Rows of (day, status, method, links, cents) that add up to the matched links.

    With no filter that needs the links themselves (document, reference, receipt), whole
    Brasília days come from the day totals and only the parts of days at the ends of the range,
    and the CREATED links whose group expires today, are read link by link
    (docs/adr/payment-links.md).
    Otherwise the matched links are read (their filters have indexes of their own). Status and
    method are filtered by the caller, on these rows."""
    links = LINKS.c
    on_postgresql = shape.on_postgresql
    parts: list[Select[Any]] = []
    if shape.whole_days:
        days, moments = _BOUND_DAYS, _BOUND_MOMENTS
        parts += totals.total_parts(
            on_postgresql,
            customer_id=CUSTOMER,
            first=days["first"],
            last=days["last"],
            expiring_first=days["expiring_first"],
            expiring_last=days["expiring_last"],
        )
        # The CREATED links of the groups left out above: those due around now (expires_at is
        # in the index; the day arithmetic picks exactly the groups' links).
        expiry_day = totals.days_after(
            on_postgresql,
            totals.brasilia_day(on_postgresql, links.created_at),
            links.expiration_days,
        )
        parts.append(
            _read_links(
                on_postgresql,
                links.created_at >= moments["expiring_from"],
                links.created_at < moments["expiring_until"],
                links.status == "CREATED",
                links.expires_at >= moments["expires_from"],
                links.expires_at < moments["expires_until"],
                expiry_day >= days["expiring_first"],
                expiry_day <= days["expiring_last"],
                with_payments=False,
            )
        )
        ends = [
            (links.created_at >= filters.start, links.created_at < moments["first_midnight"]),
            (links.created_at >= moments["last_midnight"], links.created_at <= filters.end),
        ]
        parts += [_read_links(on_postgresql, *bounds) for bounds in ends]
    else:
        parts.append(
            _read_links(
                on_postgresql,
                links.created_at >= filters.start,
                links.created_at <= filters.end,
                *_link_conditions(filters),
            )
        )
    return union_all(*parts).subquery()


def _read_links(
    on_postgresql: bool, *conditions: ColumnElement[bool], with_payments: bool = True
) -> Select[Any]:
    """Links read one by one (grouped by day, status as seen now, and method)."""
    links = LINKS.c
    day = totals.brasilia_day(on_postgresql, links.created_at)
    status = effective_status(NOW)
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
        .where(links.customer_id == CUSTOMER, *conditions)
        .group_by(day, status, method)
    )
