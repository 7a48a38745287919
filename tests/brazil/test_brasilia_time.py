"""Brasília time through the IANA database: the day it is there, its first instant, and the day
of a timestamp as SQLite stores it."""

from __future__ import annotations

from datetime import UTC, date, datetime

from tucano.brazil.brasilia_time import brasilia_date, brasilia_day_of_text, brasilia_midnight


def test_half_past_ten_on_new_years_eve_in_brasilia_is_still_the_old_year() -> None:
    assert brasilia_date(datetime(2027, 1, 1, 1, 30, tzinfo=UTC)) == date(2026, 12, 31)
    assert brasilia_date(datetime(2027, 1, 1, 3, 0, tzinfo=UTC)) == date(2027, 1, 1)


def test_a_day_begins_at_its_first_instant_in_brasilia_summer_time_too() -> None:
    assert brasilia_midnight(date(2026, 12, 31)) == datetime(2026, 12, 31, 3, tzinfo=UTC)
    # Daylight saving time (until 2019) began at midnight: that day began at 01:00 (UTC-2).
    assert brasilia_midnight(date(2018, 11, 4)) == datetime(2018, 11, 4, 3, tzinfo=UTC)
    assert brasilia_midnight(date(2018, 11, 5)) == datetime(2018, 11, 5, 2, tzinfo=UTC)


def test_the_day_of_a_timestamp_stored_as_text() -> None:
    assert brasilia_day_of_text("2027-01-01 02:59:59.999000") == "2026-12-31"
    assert brasilia_day_of_text("2027-01-01 03:00:00.000000") == "2027-01-01"
    assert brasilia_day_of_text(None) is None
