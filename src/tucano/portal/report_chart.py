"""The reports page's chart of amounts per day, drawn on the server: the geometry of an SVG bar
chart (one bar a Brasília day) that the template writes out as markup with presentation
attributes. Pure: days and amounts in, shapes and labels out. Positions are computed in Decimal,
as the amounts are, and written with one decimal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from tucano.core.languages import Language, money

WIDTH = 480
HEIGHT = 240
TOP, RIGHT, BOTTOM, LEFT = 16, 8, 28, 8
# Up to this many days the chart shows every day of the period (zero where none); past it, only
# the days that had links.
MOST_DAYS = 92
_TENTH = Decimal("0.1")


@dataclass(frozen=True)
class Bar:
    x: Decimal
    y: Decimal
    width: Decimal
    height: Decimal
    label: str  # the day and its amount, the bar's <title>


@dataclass(frozen=True)
class Line:
    """A gridline at `y`, labelled with the amount it marks."""

    y: Decimal
    label: str


@dataclass(frozen=True)
class DayMark:
    x: Decimal
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: int
    baseline: int
    bars: list[Bar]
    lines: list[Line]
    days: list[DayMark]
    top: str  # the highest day's amount, as the chart's description says it


def day_chart(
    by_day: Sequence[Mapping[str, Any]], first: date, last: date, language: Language
) -> Chart | None:
    """The chart of `by_day` (the report's byDay: date, count, amount) over [first, last];
    None when no day had a link."""
    amounts = {date.fromisoformat(day["date"]): Decimal(day["amount"]) for day in by_day}
    if not amounts:
        return None
    span = (last - first).days + 1
    if 0 < span <= MOST_DAYS:
        days = [first + timedelta(days=n) for n in range(span)]
    else:
        days = sorted(amounts)
    highest = max(amounts.values())
    scale = nice_ceiling(highest)
    plot_height = Decimal(HEIGHT - TOP - BOTTOM)
    plot_width = Decimal(WIDTH - LEFT - RIGHT)
    slot = plot_width / len(days)
    bar_width = slot * Decimal("0.7")
    bars = []
    for index, day in enumerate(days):
        amount = amounts.get(day, Decimal(0))
        height = plot_height * amount / scale
        x = LEFT + slot * index + (slot - bar_width) / 2
        bars.append(
            Bar(
                x=_tenth(x),
                y=_tenth(TOP + plot_height - height),
                width=_tenth(bar_width),
                height=_tenth(height),
                label=f"{day_label(day, language, full=True)}: {money(amount, language)}",
            )
        )
    lines = [
        Line(_tenth(TOP + plot_height - plot_height * part), money(scale * part, language))
        for part in (Decimal(0), Decimal("0.5"), Decimal(1))
    ]
    marked = sorted({0, len(days) // 2, len(days) - 1})
    marks = [
        DayMark(_tenth(LEFT + slot * index + slot / 2), day_label(days[index], language))
        for index in marked
    ]
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        right=WIDTH - RIGHT,
        baseline=HEIGHT - BOTTOM,
        bars=bars,
        lines=lines,
        days=marks,
        top=money(highest, language),
    )


def nice_ceiling(value: Decimal) -> Decimal:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least `value` (> 0)."""
    if value <= 0:
        return Decimal(1)
    power = Decimal(10) ** (value.adjusted())
    for step in (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5), Decimal(10)):
        if step * power >= value:
            return step * power
    return 10 * power  # not reached: 10 x 10^adjusted is above any value of that order


def day_label(day: date, language: Language, *, full: bool = False) -> str:
    """A day as the chart's axis (or, `full`, a bar's title) writes it."""
    if language == "pt-BR":
        return day.strftime("%d/%m/%Y" if full else "%d/%m")
    return day.isoformat() if full else day.strftime("%m-%d")


def _tenth(value: Decimal | int) -> Decimal:
    return Decimal(value).quantize(_TENTH, rounding=ROUND_HALF_UP)
