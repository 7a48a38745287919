"""When to try again: the configured schedule, with jitter, and the receiver's Retry-After."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

JITTER = 0.1  # each delay is stretched or shrunk by up to 10% so retries do not arrive in herds
# A Retry-After longer than this reads as this: it is capped far lower when used (at
# TUCANO_RETRY_AFTER_MAX_SECONDS), and a receiver's number may be too large for a timedelta.
LONGEST_RETRY_AFTER = timedelta(days=365)


def next_attempt_delay(
    *,
    attempts_made: int,
    schedule: Sequence[timedelta],
    rng: random.Random,
    retry_after: timedelta | None = None,
    retry_after_max: timedelta = timedelta(hours=1),
) -> timedelta | None:
    """The wait before the next attempt after `attempts_made` failed ones, or None when the
    schedule is used up. A Retry-After is honoured as a floor, capped at `retry_after_max`."""
    if attempts_made < 1 or attempts_made > len(schedule):
        return None
    delay = schedule[attempts_made - 1] * rng.uniform(1 - JITTER, 1 + JITTER)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_max))
    return delay


def parse_retry_after(value: str | None, *, now: datetime) -> timedelta | None:
    """`Retry-After: 120` or `Retry-After: Wed, 21 Oct 2026 07:28:00 GMT`; None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        digits = value.lstrip("0") or "0"
        if len(digits) > 9:  # more than 31 years, and maybe more digits than int() takes
            return LONGEST_RETRY_AFTER
        return min(timedelta(seconds=int(digits)), LONGEST_RETRY_AFTER)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return min(max(moment - now, timedelta(0)), LONGEST_RETRY_AFTER)
