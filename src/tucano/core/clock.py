"""UTC time for the whole service: one clock, millisecond precision, one wire format.

Timestamps are cut to milliseconds when they are made, so what is stored is exactly what a client
reads back and can filter on (`endDate` inclusive would otherwise miss a row stored at .123456).
Tests move the clock with `clock.freeze()`; production code only ever calls `clock.now()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta


def to_millis(moment: datetime) -> datetime:
    """The same instant in UTC with the microseconds cut to whole milliseconds."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    elif moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def format_utc(moment: datetime) -> str:
    """`2026-01-15T10:30:00.000Z`: ISO 8601, UTC, milliseconds, as every response carries."""
    m = to_millis(moment)
    # Not strftime: its %Y does not pad years before 1000 to four digits on every platform.
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond // 1000:03d}Z"
    )


def start_of_day(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def end_of_day(day: date) -> datetime:
    return datetime.combine(day, time(23, 59, 59, 999000), tzinfo=UTC)


class Clock:
    """Wall-clock UTC time that tests can stop or move."""

    def __init__(self) -> None:
        self._frozen: datetime | None = None

    def now(self) -> datetime:
        if self._frozen is not None:
            return self._frozen
        moment = datetime.now(UTC)
        return moment.replace(microsecond=moment.microsecond - moment.microsecond % 1000)

    @contextmanager
    def freeze(self, moment: datetime | None = None) -> Iterator[Clock]:
        previous = self._frozen
        self._frozen = to_millis(moment or datetime.now(UTC))
        try:
            yield self
        finally:
            self._frozen = previous

    def advance(self, delta: timedelta) -> None:
        if self._frozen is None:
            raise RuntimeError("advance() needs a frozen clock")
        self._frozen = to_millis(self._frozen + delta)


clock = Clock()
