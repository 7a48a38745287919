"""The chart of amounts per day: one bar a day of the period (zero where none), heights in
proportion to a round top, and labels in the page's language."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from tucano.portal.report_chart import BOTTOM, HEIGHT, MOST_DAYS, TOP, day_chart, nice_ceiling


def test_every_day_of_the_period_has_a_bar_in_proportion_to_its_amount() -> None:
    by_day = [
        {"date": "2026-12-01", "count": 2, "amount": Decimal("150.00")},
        {"date": "2026-12-03", "count": 1, "amount": Decimal("75.00")},
    ]
    chart = day_chart(by_day, date(2026, 12, 1), date(2026, 12, 4), "pt-BR")
    assert chart is not None
    assert [bar.label for bar in chart.bars] == [
        "01/12/2026: R$ 150,00",
        "02/12/2026: R$ 0,00",
        "03/12/2026: R$ 75,00",
        "04/12/2026: R$ 0,00",
    ]
    plot = HEIGHT - TOP - BOTTOM
    # The top is 200: 150 is three quarters of the height, 75 three eighths.
    assert [bar.height for bar in chart.bars] == [
        Decimal(plot * 3 / 4).quantize(Decimal("0.1")),
        Decimal("0.0"),
        Decimal(plot * 3 / 8).quantize(Decimal("0.1")),
        Decimal("0.0"),
    ]
    assert all(bar.y + bar.height == HEIGHT - BOTTOM for bar in chart.bars)
    assert [line.label for line in chart.lines] == ["R$ 0,00", "R$ 100,00", "R$ 200,00"]
    assert [mark.label for mark in chart.days] == ["01/12", "03/12", "04/12"]
    assert chart.top == "R$ 150,00"
    xs = [bar.x for bar in chart.bars]
    assert xs == sorted(xs) and all(bar.width > 0 for bar in chart.bars)


def test_a_long_period_shows_only_the_days_with_links_and_none_says_none() -> None:
    by_day = [
        {"date": "2025-01-05", "count": 1, "amount": Decimal("1.00")},
        {"date": "2026-06-05", "count": 1, "amount": Decimal("2.00")},
    ]
    chart = day_chart(by_day, date(2025, 1, 1), date(2026, 12, 31), "en")
    assert chart is not None
    assert [bar.label for bar in chart.bars] == ["2025-01-05: R$ 1.00", "2026-06-05: R$ 2.00"]
    assert [mark.label for mark in chart.days] == ["01-05", "06-05"]
    assert day_chart([], date(2026, 1, 1), date(2026, 1, MOST_DAYS % 28 + 1), "en") is None


@given(st.decimals(min_value=Decimal("0.01"), max_value=Decimal("999999999.99"), places=2))
def test_the_top_is_round_and_holds_the_highest_amount(amount: Decimal) -> None:
    top = nice_ceiling(amount)
    assert amount <= top < amount * 5
    assert top.normalize().as_tuple().digits[0] in (1, 2, 5)
