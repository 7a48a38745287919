"""A payment link's rules, as pure functions: its statuses and the one a reader sees at a
moment, its expiry, how it can be paid, and its instalments (over integer cents).

Two roundings of instalments, on purpose: the API's `installmentsOptions` are `amount / n`
rounded half-up to cents (what decisions.md asks for, so 100.00 in 3 shows 33.33), while the real
charge splits the amount so the instalments add up to it exactly, the remainder cent(s) on the
first; the checkout page shows the payer the real split, and offers no count whose instalments
would be under a cent (the API's options stay one per count, as the spec says).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from enum import IntEnum
from typing import Literal, Protocol

from tucano.core.money import from_cents

StatusName = Literal["CREATED", "PAID", "EXPIRED", "CANCELLED", "REFUNDED"]
STATUS_CODES: dict[str, int] = {
    "CREATED": 1,
    "PAID": 2,
    "EXPIRED": 3,
    "CANCELLED": 4,
    "REFUNDED": 5,
}
STATUS_NAMES: tuple[StatusName, ...] = ("CREATED", "PAID", "EXPIRED", "CANCELLED", "REFUNDED")
# Statuses stored as they are read (CREATED is read as EXPIRED from its expiry on).
SETTLED_STATUSES = ("PAID", "CANCELLED", "REFUNDED")
MAX_INSTALLMENTS = 10
# A Pix payment can be refunded for this long after it was received (the Banco Central's rule).
PIX_REFUND_WINDOW = timedelta(days=90)


class PaymentMethod(IntEnum):
    CREDIT_CARD = 1
    PIX = 2


METHOD_CARD = PaymentMethod.CREDIT_CARD
METHOD_PIX = PaymentMethod.PIX
METHOD_NAMES = {METHOD_CARD: "CREDIT_CARD", METHOD_PIX: "PIX"}


class StoredStatus(Protocol):
    """What a link's status at a moment depends on (a PaymentLink, or a row read with its
    column names)."""

    status: str
    expires_at: datetime


def status_at(link: StoredStatus, now: datetime) -> StatusName:
    """The status a reader sees: a CREATED link is EXPIRED from its expiration moment on; a
    paid, cancelled or refunded link never expires. EXPIRED is not stored: it is read from
    expires_at."""
    if link.status in SETTLED_STATUSES:
        return link.status  # type: ignore[return-value]
    return "EXPIRED" if now >= link.expires_at else "CREATED"


def status_after_refunds(*, amount_cents: int, refunded_cents: int) -> StatusName:
    """A paid link refunded in full is REFUNDED; refunded in part, it stays PAID."""
    return "REFUNDED" if refunded_cents >= amount_cents else "PAID"


def refund_state(*, amount_cents: int, refunded_cents: int) -> str:
    """How a paid link's event names it after a refund: REFUNDED, PARTIALLY_REFUNDED, or PAID
    while nothing has been given back."""
    if refunded_cents >= amount_cents:
        return "REFUNDED"
    return "PARTIALLY_REFUNDED" if refunded_cents > 0 else "PAID"


def expiration_of(created_at: datetime, days: int) -> datetime:
    """A link expires `days` days after it was created."""
    return created_at + timedelta(days=days)


def installment_options(amount_cents: int, max_installments: int) -> list[tuple[int, Decimal]]:
    """(n, amount / n rounded half-up to cents) for n from 1 to `max_installments`, as the spec
    gives them (the page offers only counts of a cent or more, installment_plans). In integer
    cents: half-up of cents / n is (2 * cents + n) // (2 * n)."""
    return [
        (n, from_cents((2 * amount_cents + n) // (2 * n))) for n in range(1, max_installments + 1)
    ]


def installment_plans(amount_cents: int, max_installments: int) -> list[list[int]]:
    """The real split (cents of each instalment) of every count offered, as the payer is shown
    it before paying: 99.90 in 4 is 24.99 + 3 x 24.97, not 4 x 24.98."""
    return [
        split_into_installments(amount_cents, n)
        for n in range(1, most_installments(amount_cents, max_installments) + 1)
    ]


def split_into_installments(amount_cents: int, count: int) -> list[int]:
    """The cents of each instalment of a card charge: equal parts, the remainder on the first,
    so that they always add up to `amount_cents`."""
    if count < 1:
        raise ValueError("at least one instalment")
    base, remainder = divmod(amount_cents, count)
    return [base + remainder] + [base] * (count - 1)


def most_installments(amount_cents: int, numbers_installments: int) -> int:
    """The most instalments a card charge of the link may have: those offered, and at least a
    cent each (0.02 is never charged in three)."""
    return min(numbers_installments, amount_cents)
