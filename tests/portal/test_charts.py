"""The deliveries' health chart: attempts added up per Brasília day over the last week, and the
bars' geometry proportional to them."""

from __future__ import annotations

from datetime import UTC, date, datetime

from tucano.deliveries.history import HourOfAttempts
from tucano.deliveries.result_counts import hour_of
from tucano.portal.charts import (
    BOTTOM,
    HEIGHT,
    DayOfAttempts,
    days_of,
    first_hour,
    health_chart,
    round_top,
)

TODAY = date(2026, 12, 7)


def test_hours_are_added_up_per_brasilia_day() -> None:
    hours = [
        # 02:00 UTC on the 7th is still the 6th in Brasília (UTC-3).
        HourOfAttempts(hour_of(datetime(2026, 12, 7, 2, tzinfo=UTC)), 2, 1),
        HourOfAttempts(hour_of(datetime(2026, 12, 7, 3, tzinfo=UTC)), 5, 0),
        HourOfAttempts(hour_of(datetime(2026, 12, 7, 20, tzinfo=UTC)), 1, 4),
        HourOfAttempts(hour_of(datetime(2026, 12, 1, 3, tzinfo=UTC)), 9, 9),
        HourOfAttempts(hour_of(datetime(2026, 11, 30, 3, tzinfo=UTC)), 7, 7),  # a day too early
    ]
    days = days_of(hours, today=TODAY, language="pt-BR")
    assert [day.label for day in days] == [
        "01/12",
        "02/12",
        "03/12",
        "04/12",
        "05/12",
        "06/12",
        "07/12",
    ]
    assert [(day.succeeded, day.failed) for day in days] == [
        (9, 9),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (2, 1),
        (6, 4),
    ]
    assert days_of([], today=TODAY, language="en")[-1].label == "Dec 7"
    assert first_hour(TODAY) == hour_of(datetime(2026, 12, 1, 3, tzinfo=UTC))


def test_the_axis_top_is_a_round_number_that_holds_the_busiest_day() -> None:
    assert [round_top(n) for n in (0, 1, 2, 3, 6, 10, 11, 49, 51, 1999)] == [
        1,
        1,
        2,
        5,
        10,
        10,
        20,
        50,
        100,
        2000,
    ]


def test_bars_are_as_tall_as_their_attempts_failed_on_top() -> None:
    days = [DayOfAttempts(date(2026, 12, n), str(n), 0, 0) for n in range(1, 7)]
    days.append(DayOfAttempts(TODAY, "7", 12, 3))
    chart = health_chart(days)
    assert (chart.succeeded, chart.failed, chart.attempts) == (12, 3, 15)
    assert [tick.value for tick in chart.ticks] == [0, 10, 20]
    base = HEIGHT - BOTTOM
    today = chart.bars[-1]
    full = base - chart.ticks[-1].y
    assert today.succeeded_height == round(full * 12 / 20, 1)
    assert today.failed_height == round(full * 3 / 20, 1)
    assert today.succeeded_y + today.succeeded_height == base
    assert today.failed_y + today.failed_height == today.succeeded_y
    assert chart.bars[0].succeeded_height == chart.bars[0].failed_height == 0
    assert all(a.x < b.x for a, b in zip(chart.bars, chart.bars[1:], strict=False))
    assert chart.bars[-1].x + chart.bars[-1].width <= chart.right
