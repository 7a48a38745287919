"""The filters of a customer's payment links (list, report, CSV), the status a reader sees in
SQL, and sorting."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    case,
    select,
)

from tucano.brazil.documents import normalize_document
from tucano.core.card_numbers import redact_card_numbers
from tucano.core.errors import BadRequest
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.reads import LINKS, PAYMENTS
from tucano.payment_links.schemas import (
    STATUS_CODES,
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
            *link_conditions(filters),
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


def link_conditions(filters: LinkFilters) -> list[ColumnElement[bool]]:
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
