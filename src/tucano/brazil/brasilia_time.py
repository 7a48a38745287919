"""Brasília time (`America/Sao_Paulo`), the clock Brazilian rules are read by: a card is valid
through the last day of its month there, and a report's day is a day there.

Through the IANA time-zone database (the `tzdata` package where the system has none), not a
fixed UTC-3: Brazil kept daylight saving time until 2019 and may bring it back."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

BRASILIA = ZoneInfo("America/Sao_Paulo")


def brasilia_date(moment: datetime) -> date:
    """The day it is in Brasília at `moment` (an aware datetime)."""
    return moment.astimezone(BRASILIA).date()


def brasilia_midnight(day: date) -> datetime:
    """The first instant of `day` in Brasília, in UTC. (Where daylight saving time began at
    midnight, as Brazil's did, 00:00 did not exist and the day began at 01:00 summer time: the
    same instant.)"""
    return datetime.combine(day, time(0), tzinfo=BRASILIA).astimezone(UTC)


def brasilia_day_of_text(stored: str | None) -> str | None:
    """The Brasília day, as YYYY-MM-DD, of a UTC timestamp stored as text (SQLite's form):
    what SQL computes with `timezone('America/Sao_Paulo', ...)` on PostgreSQL."""
    if stored is None:
        return None
    moment = datetime.fromisoformat(stored)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return brasilia_date(moment).isoformat()
