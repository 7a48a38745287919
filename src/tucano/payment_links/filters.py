"""What a list, report or CSV of a customer's links asks for: the filters, and the sort, as
checked values (the statements that apply them are listing_repository's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from tucano.brazil.brasilia_time import brasilia_date, brasilia_midnight
from tucano.core.card_numbers import redact_card_numbers
from tucano.core.errors import BadRequest
from tucano.payment_links.domain import StatusName

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


def full_days(start: datetime, end: datetime) -> tuple[date, date]:
    """The Brasília days (decisions.md: a report's days are Brasília's) wholly inside
    [start, end] (end inclusive, to the millisecond), as a half-open range of dates; empty
    (first >= last) when there is none."""
    try:
        day = brasilia_date(start)
    except OverflowError:  # before 0001-01-01 in Brasília: that whole day is still to come
        first = date.min
    else:
        # At the very end of year 9999 the next day does not exist: that day is read link by link.
        whole = start == brasilia_midnight(day) or day == date.max
        first = day if whole else day + timedelta(1)
    try:
        last = brasilia_date(end + timedelta(milliseconds=1))
    except OverflowError:
        try:
            last = brasilia_date(end)
        except OverflowError:
            last = date.min
    return first, last


def midnight(day: date) -> datetime:
    """The first instant of a Brasília day."""
    return brasilia_midnight(day)


def steady_days(first: date, last: date) -> bool:
    """Whether every Brasília day in [first, last] lasts 24 hours (no daylight-saving change),
    so that a link created on day d with a validity of e days expires on day d + e."""
    return all(
        midnight(day + timedelta(1)) - midnight(day) == timedelta(days=1)
        for day in (first + timedelta(n) for n in range((last - first).days + 1))
    )
