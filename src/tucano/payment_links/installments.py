"""Instalments, as pure functions over integer cents.

Two different roundings, on purpose: the options shown to a payer are `amount / n` rounded half-up
to cents (what decisions.md asks for, so 100.00 in 3 shows 33.33), while the real charge splits
the amount so the instalments add up to it exactly, the remainder cent(s) on the first.
"""

from __future__ import annotations

from decimal import Decimal

from tucano.core.money import from_cents

MAX_INSTALLMENTS = 10


def installment_options(amount_cents: int, max_installments: int) -> list[tuple[int, Decimal]]:
    """(n, amount / n rounded half-up to cents) for n from 1 to `max_installments`. In integer
    cents: half-up of cents / n is (2 * cents + n) // (2 * n)."""
    return [
        (n, from_cents((2 * amount_cents + n) // (2 * n))) for n in range(1, max_installments + 1)
    ]


def split_into_installments(amount_cents: int, count: int) -> list[int]:
    """The cents of each instalment of a card charge: equal parts, the remainder on the first,
    so that they always add up to `amount_cents`."""
    if count < 1:
        raise ValueError("at least one instalment")
    base, remainder = divmod(amount_cents, count)
    return [base + remainder] + [base] * (count - 1)
