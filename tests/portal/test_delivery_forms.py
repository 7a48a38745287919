"""The deliveries pages' forms as a browser sends them: days and datetime-local fields read in
Brasília time, and every wrong value named by the message the page shows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from tucano.events.types import EventType
from tucano.portal.delivery_forms import (
    RecoveryRange,
    ResultsQuery,
    recovery_range,
    results_filters,
    webhook_id_of,
)

NOW = datetime(2026, 12, 7, 15, 0, tzinfo=UTC)


def test_a_brasilia_day_runs_from_its_midnight_to_the_next() -> None:
    filters, problems = results_filters(
        ResultsQuery(
            webhook="7",
            event_type="PIX_OUTBOUND",
            status="EXHAUSTED",
            start="2026-12-01",
            end="2026-12-07",
        )
    )
    assert problems == []
    assert filters.webhook_id == 7 and filters.event_type is EventType.PIX_OUTBOUND
    assert filters.status == "EXHAUSTED"
    assert filters.start == datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    assert filters.end == datetime(2026, 12, 8, 3, 0, tzinfo=UTC) - timedelta(microseconds=1)


def test_blank_filters_filter_nothing_and_the_last_day_there_is_can_end_a_range() -> None:
    filters, problems = results_filters(ResultsQuery())
    assert problems == [] and filters.webhook_id is filters.start is filters.end is None
    filters, problems = results_filters(ResultsQuery(end=date.max.isoformat()))
    assert problems == [] and filters.end is not None and filters.end.year == 9999


def test_each_wrong_filter_is_named() -> None:
    _, problems = results_filters(
        ResultsQuery(webhook="0", event_type="pix_outbound", status="OK", start="yesterday")
    )
    assert problems == ["problem_webhook", "problem_event_type", "problem_status", "problem_day"]
    _, problems = results_filters(ResultsQuery(start="2026-12-08", end="2026-12-07"))
    assert problems == ["problem_days_reversed"]


def test_a_webhook_id_is_digits_within_the_ids_range() -> None:
    assert webhook_id_of(" 12 ") == 12
    for wrong in ("", "-1", "0", "1.5", "١٢", "9" * 20, "x"):
        assert webhook_id_of(wrong) is None, wrong


def test_a_recovery_range_is_brasilia_time_and_its_end_covers_its_minute() -> None:
    asked = recovery_range("2026-12-07T09:30", "2026-12-07T11:00", now=NOW)
    assert asked == RecoveryRange(
        datetime(2026, 12, 7, 12, 30, tzinfo=UTC),
        datetime(2026, 12, 7, 14, 0, 59, 999999, tzinfo=UTC),
    )
    seconds = recovery_range("2026-12-07T09:30:15", "2026-12-07T11:00:05", now=NOW)
    assert isinstance(seconds, RecoveryRange)
    assert seconds.until == datetime(2026, 12, 7, 14, 0, 5, tzinfo=UTC)
    until_now = recovery_range("2026-12-07T09:30", "", now=NOW)
    assert isinstance(until_now, RecoveryRange) and until_now.until == NOW


def test_each_wrong_recovery_range_is_named() -> None:
    assert recovery_range("", "2026-12-07T11:00", now=NOW) == "problem_since"
    for wrong in ("2026-12-07", "2026-12-07 09:30", "2026-12-07T09:30Z", "9999-12-31T23:59"):
        assert recovery_range(wrong, "", now=NOW) == "problem_moment", wrong
    assert recovery_range("2026-12-07T09:30", "9999-12-31T23:59", now=NOW) == "problem_moment"
    assert recovery_range("2026-12-07T11:00", "2026-12-07T10:00", now=NOW) == (
        "problem_range_reversed"
    )
    assert recovery_range("2026-11-20T10:00", "2026-12-07T10:00", now=NOW) == (
        "problem_range_too_long"
    )
    # Fourteen days to the minute, its last minute whole, is not too long.
    assert isinstance(
        recovery_range("2026-11-23T10:00", "2026-12-07T10:00", now=NOW), RecoveryRange
    )
