"""The delivery history as a person reads it (the portal's deliveries pages): an event with its
attempts, and how many attempts succeeded and failed in each hour of a recent period."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.errors import ErrorCode, NotFound
from tucano.deliveries.history_repository import HistoryRepository
from tucano.deliveries.models import DeliveryResult, Event, ResultStatus
from tucano.deliveries.repository import DeliveryRepository

# Attempts are stamped by the worker's clock, the event by the API's: another machine's clock
# may run a little behind.
CLOCK_SLACK = timedelta(minutes=5)


class HourOfAttempts(NamedTuple):
    hour: int  # hours since 1970-01-01T00:00Z (result_counts.hour_of)
    succeeded: int
    failed: int  # the receiver failed (PENDING_RETRY or EXHAUSTED)


async def get_event(session: AsyncSession, *, customer_id: int, event_id: str) -> Event:
    """One of the customer's events; another customer's is answered as a missing one."""
    event = await DeliveryRepository(session).get_event(customer_id=customer_id, event_id=event_id)
    if event is None:
        raise NotFound(ErrorCode.EVENT_NOT_FOUND)
    return event


async def event_attempts(
    session: AsyncSession, *, event: Event, limit: int = 100
) -> Sequence[DeliveryResult]:
    """The first `limit` attempts to deliver the event, to any of its customer's webhooks,
    oldest first."""
    return await HistoryRepository(session).attempts_of_event(
        customer_id=event.customer_id,
        event_id=event.id,
        event_type=event.event_type,
        since=event.created_at - CLOCK_SLACK,
        limit=limit,
    )


async def attempts_per_hour(
    session: AsyncSession, *, customer_id: int, webhook_id: int | None, since_hour: int
) -> list[HourOfAttempts]:
    """The hours from `since_hour` on that have attempts (of one webhook, or all the
    customer's), in order, each with how many succeeded and how many the receiver failed."""
    hours: dict[int, HourOfAttempts] = {}
    for hour, status, attempts in await HistoryRepository(session).attempts_by_hour(
        customer_id=customer_id, webhook_id=webhook_id, since_hour=since_hour
    ):
        counted = hours.get(hour, HourOfAttempts(hour, 0, 0))
        if status == ResultStatus.SUCCESS:
            counted = counted._replace(succeeded=counted.succeeded + attempts)
        else:
            counted = counted._replace(failed=counted.failed + attempts)
        hours[hour] = counted
    return [hours[hour] for hour in sorted(hours)]
