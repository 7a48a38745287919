"""The deliveries' health as a chart drawn on the server: attempts per Brasília day over the
last week, each day's bar split into succeeded and failed. Only the geometry is worked out here;
the template writes it as an inline SVG (markup, so the portal's CSP allows it, with colours as
presentation attributes rather than style)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from tucano.brazil.brasilia_time import brasilia_date, brasilia_midnight
from tucano.core.languages import Language
from tucano.deliveries.history import HourOfAttempts
from tucano.deliveries.result_counts import EPOCH, HOUR, hour_of

DAYS = 7
# Small units, so that labels stay readable on a phone's width (the chart scales to fit).
WIDTH, HEIGHT = 400, 200
LEFT, RIGHT, TOP, BOTTOM = 30, 6, 10, 26
PLOT_WIDTH, PLOT_HEIGHT = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
BAR_SHARE = 0.55  # of each day's slot


@dataclass(frozen=True)
class DayOfAttempts:
    day: date
    label: str  # the day as the page's language writes it short
    succeeded: int
    failed: int

    @property
    def attempts(self) -> int:
        return self.succeeded + self.failed


@dataclass(frozen=True)
class Bar:
    day: DayOfAttempts
    x: float
    width: float
    centre: float
    succeeded_y: float
    succeeded_height: float
    failed_y: float
    failed_height: float


@dataclass(frozen=True)
class Tick:
    value: int
    y: float


@dataclass(frozen=True)
class HealthChart:
    days: list[DayOfAttempts]
    bars: list[Bar]
    ticks: list[Tick]
    succeeded: int
    failed: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    base: int = TOP + PLOT_HEIGHT
    label_y: int = HEIGHT - 8

    @property
    def attempts(self) -> int:
        return self.succeeded + self.failed


def first_hour(today: date) -> int:
    """The hour the chart's first day starts in (hours since the epoch, as the counts are)."""
    return hour_of(brasilia_midnight(today - timedelta(days=DAYS - 1)))


def short_day(day: date, language: Language) -> str:
    return f"{day:%d/%m}" if language == "pt-BR" else f"{day:%b} {day.day}"


def days_of(
    hours: Sequence[HourOfAttempts], *, today: date, language: Language
) -> list[DayOfAttempts]:
    """The last DAYS Brasília days up to `today`, each with its hours' attempts added up."""
    first = today - timedelta(days=DAYS - 1)
    succeeded = [0] * DAYS
    failed = [0] * DAYS
    for hour in hours:
        index = (brasilia_date(EPOCH + hour.hour * HOUR) - first).days
        if 0 <= index < DAYS:
            succeeded[index] += hour.succeeded
            failed[index] += hour.failed
    return [
        DayOfAttempts(
            first + timedelta(days=n), short_day(first + timedelta(days=n), language), s, f
        )
        for n, (s, f) in enumerate(zip(succeeded, failed, strict=True))
    ]


def round_top(most: int) -> int:
    """The axis's top: the least of 1, 2 or 5 times a power of ten that holds `most`."""
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= most:
                return step * scale
        scale *= 10


def health_chart(days: list[DayOfAttempts]) -> HealthChart:
    top = round_top(max((day.attempts for day in days), default=0))
    slot = PLOT_WIDTH / len(days)
    width = slot * BAR_SHARE
    base = TOP + PLOT_HEIGHT

    def height(value: int) -> float:
        return round(PLOT_HEIGHT * value / top, 1)

    bars = []
    for n, day in enumerate(days):
        x = round(LEFT + n * slot + (slot - width) / 2, 1)
        ok, bad = height(day.succeeded), height(day.failed)
        bars.append(
            Bar(
                day=day,
                x=x,
                width=round(width, 1),
                centre=round(LEFT + (n + 0.5) * slot, 1),
                succeeded_y=round(base - ok, 1),
                succeeded_height=ok,
                failed_y=round(base - ok - bad, 1),
                failed_height=bad,
            )
        )
    values = [0, top // 2, top] if top % 2 == 0 else [0, top]
    ticks = [Tick(value, round(base - height(value), 1)) for value in values]
    return HealthChart(
        days=days,
        bars=bars,
        ticks=ticks,
        succeeded=sum(day.succeeded for day in days),
        failed=sum(day.failed for day in days),
    )
