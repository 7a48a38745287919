from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.deliveries.worker.retry import (
    LONGEST_RETRY_AFTER,
    next_attempt_delay,
    parse_retry_after,
)
from tucano.setting_values import parse_duration

SCHEDULE = [parse_duration(d) for d in ["5s", "5m", "30m", "2h", "5h", "10h", "10h"]]
NOW = datetime(2026, 1, 15, 10, 30, tzinfo=UTC)


@given(attempts=st.integers(min_value=1, max_value=7), seed=st.integers())
def test_each_delay_is_the_schedule_within_ten_percent(attempts: int, seed: int) -> None:
    delay = next_attempt_delay(attempts_made=attempts, schedule=SCHEDULE, rng=random.Random(seed))
    assert delay is not None
    expected = SCHEDULE[attempts - 1]
    assert expected * 0.9 <= delay <= expected * 1.1


def test_the_schedule_runs_out_after_eight_attempts() -> None:
    assert next_attempt_delay(attempts_made=8, schedule=SCHEDULE, rng=random.Random(1)) is None


def test_retry_after_is_a_floor_capped_at_the_maximum() -> None:
    rng = random.Random(1)
    longer = next_attempt_delay(
        attempts_made=1, schedule=SCHEDULE, rng=rng, retry_after=timedelta(seconds=90)
    )
    assert longer == timedelta(seconds=90)
    capped = next_attempt_delay(
        attempts_made=1,
        schedule=SCHEDULE,
        rng=rng,
        retry_after=timedelta(days=3),
        retry_after_max=timedelta(hours=1),
    )
    assert capped == timedelta(hours=1)
    shorter = next_attempt_delay(
        attempts_made=2, schedule=SCHEDULE, rng=rng, retry_after=timedelta(seconds=1)
    )
    assert shorter is not None and shorter >= timedelta(minutes=4.5)


def test_retry_after_forms() -> None:
    assert parse_retry_after("120", now=NOW) == timedelta(seconds=120)
    assert parse_retry_after("Thu, 15 Jan 2026 10:31:00 GMT", now=NOW) == timedelta(seconds=60)
    assert parse_retry_after("Thu, 15 Jan 2026 10:00:00 GMT", now=NOW) == timedelta(0)
    assert parse_retry_after("soon", now=NOW) is None
    assert parse_retry_after(None, now=NOW) is None
    assert parse_retry_after("-5", now=NOW) is None
    assert parse_retry_after("1²", now=NOW) is None  # a digit to str.isdigit, not to int()
    assert parse_retry_after("0000000000001", now=NOW) == timedelta(seconds=1)


@pytest.mark.parametrize(
    "value", ["99999999999999", "9" * 5000, "31536001", "Fri, 31 Dec 9999 23:59:59 GMT"]
)
def test_a_retry_after_too_long_for_any_use_reads_as_a_year(value: str) -> None:
    assert parse_retry_after(value, now=NOW) == LONGEST_RETRY_AFTER == timedelta(days=365)
