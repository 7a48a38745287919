"""The statements of the links list and report, built once per shape (the filters given, the
status, the sort) with their values bound per request, and the day-total arithmetic of their
counts (docs/performance.md: building a statement and its cache key anew cost more than the
database's work)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    func,
    literal,
    select,
    union_all,
)

from tucano.brazil.documents import normalize_document
from tucano.db.compiled_reads import CompiledRead, compiled_read
from tucano.payment_links import totals
from tucano.payment_links.link_filters import (
    LinkFilters,
    canonical_sort,
    effective_status,
    link_conditions,
    matched_links,
    parse_sort,
)
from tucano.payment_links.models import PaymentLink
from tucano.payment_links.reads import LINKS, PAYMENT_VIEW, PAYMENTS
from tucano.payment_links.schemas import (
    StatusName,
)


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


class ListShape(NamedTuple):
    """What a statement's form depends on; everything else is a bound value."""

    dialect: str
    status: StatusName | None
    given: frozenset[str]  # the optional filters given (their values are bound)
    whole_days: bool  # whether the range holds a whole UTC day (see _tallied)
    sort: tuple[tuple[str, str], ...]


def shape_and_values(
    dialect: str, customer_id: int, filters: LinkFilters, now: datetime, sort: Sequence[str]
) -> tuple[ListShape, dict[str, Any]]:
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
    shape = ListShape(dialect, filters.status, given, whole_days, canonical_sort(sort))
    return shape, values


# The filters that need the links themselves (their indexes), not the day totals.
_LINK_FILTERS = frozenset({"registration_number", "user_reference", "payment_receipt"})


def _bound_filters(shape: ListShape) -> LinkFilters:
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
def list_statements(shape: ListShape) -> _ListStatements:
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


def _total_of(total: Any) -> Any:
    return total


@lru_cache(maxsize=512)
def compiled_list(shape: ListShape) -> tuple[CompiledRead, CompiledRead]:
    """list_statements(shape), compiled to run straight on the driver's connection."""
    statements = list_statements(shape)
    row = NamedTuple(  # type: ignore[misc]  # the page's columns, by name
        "ListedLink", [(column.name, Any) for column in statements.page.selected_columns]
    )
    return (
        compiled_read(shape.dialect, statements.page, row),
        compiled_read(shape.dialect, statements.total, _total_of),
    )


@lru_cache(maxsize=512)
def tally_statement(shape: ListShape) -> Select[Any]:
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


def _tallied_conditions(counted: Any, filters: LinkFilters) -> list[ColumnElement[bool]]:
    """The status and method filters, on the rows of _tallied."""
    conditions = []
    if filters.status is not None:
        conditions.append(counted.c.status == filters.status)
    if filters.payment_method is not None:
        conditions.append(counted.c.method == filters.payment_method)
    return conditions


def _matched_total(shape: ListShape, filters: LinkFilters) -> Any:
    """How many links match, as one SQL expression (uncorrelated, to sit beside a page)."""
    counted = _tallied(shape, filters)
    return (
        select(func.coalesce(func.sum(counted.c.links), 0))
        .where(*_tallied_conditions(counted, filters))
        .correlate(None)
        .scalar_subquery()
    )


def _tallied(shape: ListShape, filters: LinkFilters) -> Any:
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
                *link_conditions(filters),
            )
        )
    return union_all(*parts).subquery()


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
