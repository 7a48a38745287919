"""The delivery history as a person reads it: an event's attempts to every webhook, oldest
first, never another customer's; and attempts per hour, succeeded and failed apart."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.support.service import new_customer_id
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.db.database import Database
from tucano.deliveries import history
from tucano.deliveries.models import Event, ResultStatus
from tucano.deliveries.result_counts import hour_of
from tucano.deliveries.result_repository import ResultRepository

NOW = clock.now()


def attempt(
    customer_id: int,
    event_id: str,
    *,
    webhook_id: int = 1,
    status: str = ResultStatus.SUCCESS,
    at: timedelta = timedelta(0),
    number: int = 1,
) -> dict[str, Any]:
    return {
        "delivery_id": 1,
        "customer_id": customer_id,
        "webhook_id": webhook_id,
        "event_id": event_id,
        "event_type": "PIX_OUTBOUND",
        "target_url": f"https://hooks.example.com/{webhook_id}",
        "attempt": number,
        "status": status,
        "http_status": 200 if status == ResultStatus.SUCCESS else None,
        "response_body": None,
        "error_message": None,
        "duration_ms": 5,
        "attempted_at": NOW + at,
        "next_attempt_at": None,
    }


async def test_an_events_attempts_oldest_first_and_only_its_customers(database: Database) -> None:
    customer, other = new_customer_id(), new_customer_id()
    event_id = f"evt_history_{customer}"
    async with database.session() as session:
        session.add(
            Event(
                id=event_id,
                customer_id=customer,
                event_type="PIX_OUTBOUND",
                payload="{}",
                created_at=NOW,
            )
        )
        await ResultRepository(session).add(
            [
                attempt(customer, event_id, status=ResultStatus.PENDING_RETRY, at=timedelta(0)),
                attempt(customer, event_id, webhook_id=2, at=timedelta(seconds=1)),
                attempt(customer, event_id, at=timedelta(seconds=5), number=2),
                # A worker whose clock runs a little behind the API's.
                attempt(customer, event_id, webhook_id=3, at=-timedelta(seconds=30)),
                attempt(customer, "evt_another", at=timedelta(seconds=2)),
                attempt(other, event_id, at=timedelta(seconds=3)),
            ]
        )
        await session.commit()
    async with database.read_session() as session:
        event = await history.get_event(session, customer_id=customer, event_id=event_id)
        attempts = await history.event_attempts(session, event=event)
        first_two = await history.event_attempts(session, event=event, limit=2)
        with pytest.raises(AppError) as refused:
            await history.get_event(session, customer_id=other, event_id=event_id)
    assert [(a.webhook_id, a.attempt) for a in attempts] == [(3, 1), (1, 1), (2, 1), (1, 2)]
    assert [a.id for a in first_two] == [a.id for a in attempts[:2]]
    assert refused.value.code is ErrorCode.EVENT_NOT_FOUND


async def test_attempts_per_hour_of_a_webhook_or_all(database: Database) -> None:
    customer, other = new_customer_id(), new_customer_id()
    hours = [
        attempt(customer, "evt_1", at=-timedelta(hours=2)),
        attempt(customer, "evt_1", status=ResultStatus.EXHAUSTED, at=-timedelta(hours=2)),
        attempt(customer, "evt_2", webhook_id=2, status=ResultStatus.PENDING_RETRY),
        attempt(customer, "evt_3"),
        # Cancelled unsent: says nothing of the receiver.
        attempt(customer, "evt_4", status=ResultStatus.FAILED),
        attempt(customer, "evt_5", at=-timedelta(hours=30)),  # before the period asked for
        attempt(other, "evt_6"),
    ]
    async with database.session() as session:
        await ResultRepository(session).add(hours)
        await session.commit()
    since = hour_of(NOW) - 24
    async with database.read_session() as session:
        every = await history.attempts_per_hour(
            session, customer_id=customer, webhook_id=None, since_hour=since
        )
        second = await history.attempts_per_hour(
            session, customer_id=customer, webhook_id=2, since_hour=since
        )
    two_hours_ago = hour_of(NOW - timedelta(hours=2))
    assert every == [
        history.HourOfAttempts(two_hours_ago, 1, 1),
        history.HourOfAttempts(hour_of(NOW), 1, 1),
    ]
    assert second == [history.HourOfAttempts(hour_of(NOW), 0, 1)]
