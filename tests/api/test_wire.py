"""Time-range bounds as the lists read them (wire.RangeStart, RangeEnd, range_is_reversed)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from tucano.api.wire import RangeEnd, RangeStart, range_is_reversed


def reversed_as_sent(start: str, end: str) -> bool:
    return range_is_reversed(
        TypeAdapter(RangeStart).validate_python(start),
        TypeAdapter(RangeEnd).validate_python(end),
        start_as_sent=start,
        end_as_sent=end,
    )


@pytest.mark.parametrize(
    ("start", "end", "reversed_"),
    [
        # Inside one millisecond: empty when the start comes first, reversed when it comes after.
        ("2026-01-01T10:00:00.0005Z", "2026-01-01T10:00:00.0009Z", False),
        ("2026-01-01T10:00:00.0009Z", "2026-01-01T10:00:00.0001Z", True),
        # Past the microsecond, which datetime drops.
        ("2026-01-01T10:00:00.0000001Z", "2026-01-01T10:00:00.0000005Z", False),
        ("2026-01-01T10:00:00.0000005Z", "2026-01-01T10:00:00.0000001Z", True),
        # A bare date as the end is its whole day.
        ("2026-01-01T23:59:59.9995Z", "2026-01-01", False),
        ("2026-01-02T00:00:00.0001Z", "2026-01-01", True),
        ("2026-02-01", "2026-01-31T23:59:59.999Z", True),
        ("2026-01-02", "2026-01-01", True),
        # Offsets are applied before comparing.
        ("2026-01-01T07:00:00.0005-03:00", "2026-01-01T10:00:00.0009Z", False),
        ("2026-01-15T23:59:59.99999999Z", "2026-01-15", False),
        ("2026-01-15T20:59:59.99999999-03:00", "2026-01-15", False),
        # A leap second comes after every fraction of the second before it.
        ("2026-12-31T23:59:60Z", "2026-12-31T23:59:60Z", False),
        ("2026-12-31T23:59:60Z", "2026-12-31T23:59:59.9999Z", True),
        ("2026-12-31T23:59:60Z", "2026-12-31T23:59:59.99999999Z", True),
        ("2026-12-31T23:59:59.99999999Z", "2026-12-31T23:59:60Z", False),
        ("2026-12-31T23:59:60.5Z", "2026-12-31T23:59:60.2Z", True),
        ("2026-12-31T23:59:60.2Z", "2026-12-31T23:59:60,5Z", False),
        ("2026-12-31T23:59:60.5Z", "2026-12-31", False),
    ],
)
def test_a_range_is_reversed_only_when_its_start_as_sent_comes_after_its_end(
    start: str, end: str, reversed_: bool
) -> None:
    assert reversed_as_sent(start, end) is reversed_


@pytest.mark.parametrize("sent", ["2026-01-15T10.5", "2026-01-15T10:30.5", "2026-01-15T1030,5Z"])
def test_a_fraction_of_an_hour_or_a_minute_is_refused_not_read_as_of_a_second(sent: str) -> None:
    with pytest.raises(ValueError, match="must give seconds before a fraction"):
        TypeAdapter(RangeStart).validate_python(sent)
    assert TypeAdapter(RangeEnd).validate_python("2026-01-15T10:30:15,5Z").microsecond == 500000
