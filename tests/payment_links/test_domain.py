"""Money and instalments as pure functions (property tests)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from tucano.core.money import Money, from_cents, to_cents
from tucano.payment_links.domain import (
    installment_options,
    installment_plans,
    split_into_installments,
)

cents = st.integers(min_value=1, max_value=99_999_999_999)
counts = st.integers(min_value=1, max_value=10)


@given(cents, counts)
def test_the_real_split_always_adds_up_with_the_remainder_on_the_first(
    amount_cents: int, count: int
) -> None:
    parts = split_into_installments(amount_cents, count)
    assert len(parts) == count
    assert sum(parts) == amount_cents
    assert all(p == parts[1] for p in parts[1:])
    assert 0 <= parts[0] - parts[-1] < count


@given(cents, counts)
def test_options_are_each_share_rounded_half_up_to_cents(amount_cents: int, count: int) -> None:
    amount = from_cents(amount_cents)
    options = installment_options(amount_cents, count)
    assert [n for n, _ in options] == list(range(1, count + 1))
    for n, each in options:
        exact = Decimal(amount_cents) / (100 * n)
        assert each == exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        assert abs(each * n - amount) <= Decimal("0.005") * n
        assert each.as_tuple().exponent == -2


def test_known_roundings() -> None:
    assert installment_options(10000, 3)[2] == (3, Decimal("33.33"))
    assert installment_options(5, 2)[1] == (2, Decimal("0.03"))  # 0.025 half-up
    assert installment_options(1000, 6)[5] == (6, Decimal("1.67"))
    assert installment_options(3, 2)[1] == (2, Decimal("0.02"))  # 0.015 half-up
    assert installment_options(1, 2)[1] == (2, Decimal("0.01"))  # 0.005 half-up, as the spec says
    assert split_into_installments(10000, 3) == [3334, 3333, 3333]
    assert split_into_installments(5, 2) == [3, 2]


@given(cents, counts)
def test_the_plans_offered_are_the_real_splits_and_none_under_a_cent(
    amount_cents: int, count: int
) -> None:
    plans = installment_plans(amount_cents, count)
    assert plans == [split_into_installments(amount_cents, n) for n in range(1, len(plans) + 1)]
    assert len(plans) == min(count, amount_cents)
    assert len(installment_options(amount_cents, count)) == count  # the API's, as the spec says
    assert all(min(parts) >= 1 for parts in plans)


def test_counts_under_a_cent_each_are_not_offered() -> None:
    # (Issue 36: R$ 0,98 in 10 is charged 0.17 + 9 x 0.09, and R$ 0,03 has three cents to split.)
    assert installment_plans(98, 10)[9] == [17] + [9] * 9
    assert installment_plans(9990, 4)[3] == [2499, 2497, 2497, 2497]
    assert [sum(parts) for parts in installment_plans(3, 10)] == [3, 3, 3]
    assert len(installment_plans(3, 10)) == 3


@given(cents)
def test_cents_round_trip(amount_cents: int) -> None:
    assert to_cents(from_cents(amount_cents)) == amount_cents


@pytest.mark.parametrize(
    "value",
    [Decimal("10.555"), Decimal("0.00"), Decimal("-1"), "1e1", "10.", "", True, Decimal("1e10")],
)
def test_money_refuses(value: object) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(Money).validate_python(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("10.5"), "10.50"),
        (10, "10.00"),
        (Decimal("0.01"), "0.01"),
        (Decimal("999999999.99"), "999999999.99"),
        ("10.5", "10.50"),  # a string in plain decimal notation, as PIX APIs write amounts
        ("7", "7.00"),
    ],
)
def test_money_keeps_two_decimals(value: object, expected: str) -> None:
    parsed = TypeAdapter(Money).validate_python(value)
    assert f"{parsed:.2f}" == expected
