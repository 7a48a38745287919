"""Money: `Decimal` at the edges, integer cents in the database, never a binary float.

`Money` is the pydantic type of every amount on the wire: a JSON number (or a string holding one
in plain decimal notation, "10.50", as PIX APIs write amounts; not a boolean) with at most two
decimals, from 0.01 to 999,999,999.99, kept as a `Decimal` quantized to
cents, so it leaves as `10.50`, never `10.5`.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

CENT = Decimal("0.01")
MIN_AMOUNT = Decimal("0.01")
MAX_AMOUNT = Decimal("999999999.99")


# An amount sent as a string, as PIX APIs write them ("10.50"): plain decimal notation only.
_DECIMAL_TEXT = re.compile(r"-?[0-9]{1,40}(?:\.[0-9]{1,40})?")


def _number_only(value: Any) -> Any:
    if isinstance(value, str) and _DECIMAL_TEXT.fullmatch(value):
        return Decimal(value)
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError('must be a number (or a string such as "10.50")')
    return value


def quantize_cents(value: Decimal) -> Decimal:
    """Round half-up to whole cents (the display rule for instalments)."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def to_cents(amount: Decimal) -> int:
    cents = amount * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"{amount} has fractions of a cent")
    return int(cents)


def from_cents(cents: int) -> Decimal:
    return (Decimal(cents) / 100).quantize(CENT)


_CheckedMoney = Annotated[
    Decimal,
    BeforeValidator(_number_only),
    Field(ge=MIN_AMOUNT, le=MAX_AMOUNT, decimal_places=2),
    # Exact (at most two decimals were allowed): 10.5 becomes 10.50, the one spelling of it.
    AfterValidator(quantize_cents),
]
# Documented by hand: pydantic would document a Decimal as number or string, and its bounds under
# keys JSON Schema does not know. No multipleOf: a validator working in binary floats finds
# 4596.07 not a multiple of 0.01 and would refuse real amounts.
# What a generator cannot tell from `type: number`: the amount is exact (docs/clients.md).
EXACT_DECIMAL = {"format": "decimal", "x-decimal-places": 2}
_AMOUNT_NUMBER = {"type": "number", **EXACT_DECIMAL, "minimum": 0.01, "maximum": 999999999.99}

# An amount a client sends: a JSON number, or a string in plain decimal notation.
Money = Annotated[
    _CheckedMoney,
    WithJsonSchema(
        {
            "anyOf": [
                _AMOUNT_NUMBER,
                # Up to nine digits and two decimals, as the bounds allow, leading and trailing
                # zeros aside (at most 40 digits each side, as _DECIMAL_TEXT reads); the lower
                # bound, 0.01, JSON Schema cannot say of a string.
                {"type": "string", "pattern": r"^0{0,31}[0-9]{1,9}(\.[0-9]{1,2}0{0,38})?$"},
            ],
            "description": "0.01 to 999999999.99, at most two decimals (cents): a JSON number, "
            'or a string in plain decimal notation ("10.50").',
        }
    ),
]

# An amount in an event's payload: read as Money is (a publisher may send "10.50" too), and
# documented as what every delivery carries, a JSON number with two decimals.
PayloadMoney = Annotated[
    _CheckedMoney,
    WithJsonSchema({**_AMOUNT_NUMBER, "description": "At most two decimals (cents)."}),
]

# An amount in a response: a JSON number, always written with two decimals, exact.
MoneyOut = Annotated[
    Decimal,
    WithJsonSchema(
        {
            "type": "number",
            **EXACT_DECIMAL,
            "description": "An exact amount in reais with two decimals (10.50): read it as a "
            "decimal, not a binary float.",
        }
    ),
]
