"""The outbox as other features use it: one transaction for the change, the event and its
deliveries. Service functions on a database of their own (the helpers here are shared by the
queue's, cancellation's and results' tests)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import delete, insert, select, update

from tests.support.queue import (
    LEASE,
    add_webhook,
    claim,
    count,
    delete_webhook,
    publish,
    record_success,
    results_of,
    sweep_abandoned,
)
from tests.support.service import new_customer_id
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.deliveries.activity import NO_ACTIVITY
from tucano.deliveries.models import Delivery, DeliveryResult, Event, ResultStatus
from tucano.deliveries.queue import queue_for
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.deliveries.result_repository import ResultFilters, ResultRepository
from tucano.deliveries.service import delivery_backlog
from tucano.events.samples import sample_payload
from tucano.events.types import EventType


async def test_an_event_rolled_back_with_its_business_change_leaves_nothing(
    private_database: Database,
) -> None:
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    await publish(private_database, customer, commit=False)
    assert await count(private_database, Event, customer) == 0
    assert await count(private_database, Delivery, customer) == 0


async def test_an_event_committed_carries_one_delivery_per_active_webhook(
    private_database: Database,
) -> None:
    customer = new_customer_id()
    for active in (True, True, False):
        await add_webhook(private_database, customer, active=active)
    assert await publish(private_database, customer) == 2
    assert await count(private_database, Event, customer) == 1
    assert await count(private_database, Delivery, customer) == 2


def test_money_in_payloads_keeps_two_decimals() -> None:
    payload = sample_payload(EventType.CARD_PAYMENT_INBOUND)
    payload.amount = Decimal("10.50")  # type: ignore[attr-defined]
    assert b'"amount":10.50' in json_codec.dumps(payload)


async def test_what_a_killed_worker_held_when_its_webhook_was_deleted_is_recorded_not_sent(
    private_database: Database,
) -> None:
    """The deletion leaves a held delivery to its holder; the holder never records it (it was
    killed): once its lease has run out, with a margin, the periodic job does, once."""
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        (held,) = await claim(private_database, customer)
        await delete_webhook(private_database, customer, webhook_id)
        assert await results_of(private_database, webhook_id) == []  # left to the holder
        frozen.advance(LEASE)
        await sweep_abandoned(private_database)
        assert await results_of(private_database, webhook_id) == []  # the holder may still
        frozen.advance(deliveries.ABANDONED_AFTER)
        assert await sweep_abandoned(private_database) >= 1
        await sweep_abandoned(private_database)
    assert await results_of(private_database, webhook_id) == [
        (held.attempt, ResultStatus.FAILED, deliveries.ABANDONED)
    ]
    # The results list's totals count it (they add up hour counts, not rows).
    async with private_database.session() as session:
        _, total = await deliveries.list_results(
            session,
            customer_id=customer,
            filters=ResultFilters(webhook_id=webhook_id),
            page=PageRequest(page=0, size=10),
        )
    assert total == 1


@pytest.mark.parametrize("holder", ["records its attempt", "gives it back"])
async def test_what_its_holder_recorded_after_the_deletion_is_not_recorded_again(
    private_database: Database, holder: str
) -> None:
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        (held,) = await claim(private_database, customer)
        await delete_webhook(private_database, customer, webhook_id)
        if holder == "records its attempt":
            await record_success(private_database, [held])
        else:
            cancelled = await queue_for(private_database).release(
                [held], due_at=clock.now(), lease=LEASE
            )
            assert cancelled == [held]  # the worker records these as not sent
            await queue_for(private_database).record(
                [
                    Outcome(
                        claimed=held,
                        status=ResultStatus.FAILED,
                        target_url="https://hooks.example.com/x",
                        http_status=None,
                        response_body=None,
                        error_message="not sent: the webhook was deleted",
                        duration_ms=0,
                        attempted_at=clock.now(),
                        next_attempt_at=None,
                    )
                ],
            )
        frozen.advance(LEASE + deliveries.ABANDONED_AFTER)
        await sweep_abandoned(private_database)
    assert len(await results_of(private_database, webhook_id)) == 1


async def test_abandoned_deliveries_are_recorded_once_by_jobs_running_at_once(
    private_database: Database,
) -> None:
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    for _ in range(5):
        await publish(private_database, customer)
    with clock.freeze() as frozen:
        assert len(await claim(private_database, customer)) == 5
        await delete_webhook(private_database, customer, webhook_id)
        frozen.advance(LEASE + deliveries.ABANDONED_AFTER)
        await asyncio.gather(*(sweep_abandoned(private_database) for _ in range(3)))
    records = await results_of(private_database, webhook_id)
    assert len(records) == 5 and {status for _, status, _ in records} == {ResultStatus.FAILED}


async def test_a_webhook_with_a_large_backlog_can_still_be_deleted(
    private_database: Database,
) -> None:
    """A receiver down for days leaves tens of thousands of deliveries queued for its webhook;
    deleting the webhook still works (more of them than a statement may carry parameters) and
    records each as not sent."""
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    backlog = 40_000
    payload = sample_payload(EventType.PIX_OUTBOUND)
    async with private_database.session() as session:
        await deliveries.publish_events(
            session,
            [
                deliveries.NewEvent(customer, EventType.PIX_OUTBOUND, payload)
                for _ in range(backlog)
            ],
        )
        await session.commit()
    assert await count(private_database, Delivery, customer) == backlog

    await delete_webhook(private_database, customer, webhook_id)

    assert await count(private_database, Delivery, customer) == 0
    assert await count(private_database, DeliveryResult, customer) == backlog


async def test_pruning_removes_old_history_only(private_database: Database) -> None:
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    with clock.freeze(clock.now() - timedelta(days=100)):
        await publish(private_database, customer)
        await record_success(private_database, await claim(private_database, customer))
    await publish(private_database, customer)  # recent, still pending
    assert await count(private_database, DeliveryResult, customer) == 1

    async with private_database.session() as session:
        removed = await deliveries.prune_history(
            session, older_than=clock.now() - timedelta(days=90)
        )
        await session.commit()
    assert removed >= 2  # the old result, and the old event with its finished delivery
    assert await count(private_database, DeliveryResult, customer) == 0
    assert await count(private_database, Event, customer) == 1
    assert await count(private_database, Delivery, customer) == 1


async def test_the_backlog_counts_what_is_due_and_ages_the_oldest(
    empty_database: Database,
) -> None:
    assert await delivery_backlog(empty_database) == (0, 0.0)
    customer = new_customer_id()
    await add_webhook(empty_database, customer)
    with clock.freeze() as frozen:
        published_at = clock.now()
        for _ in range(4):
            await publish(empty_database, customer)
        held = await claim(empty_database, customer)
        async with empty_database.session() as session:
            # One a retry due later, one a retry due a minute before the others were published.
            await session.execute(
                update(Delivery)
                .where(Delivery.id == held[0].delivery_id)
                .values(attempts=1, next_attempt_at=published_at + timedelta(minutes=5))
            )
            await session.execute(
                update(Delivery)
                .where(Delivery.id == held[1].delivery_id)
                .values(attempts=1, next_attempt_at=published_at - timedelta(minutes=1))
            )
            await session.commit()
        frozen.advance(timedelta(seconds=30))
        backlog = await delivery_backlog(empty_database)
    # Claimed and not recorded is still due: the worker is behind on it.
    assert backlog.due == 3
    assert backlog.oldest_due_age_seconds == 90.0


# --- recovery ---------------------------------------------------------------------------------


async def attempt(
    database: Database, claims: list[ClaimedDelivery], status: str, *, retry: bool = False
) -> None:
    """Record one attempt of each claimed delivery, now, ended with `status` (retried later
    when `retry`)."""
    await queue_for(database).record(
        [
            Outcome(
                claimed=c,
                status=status,
                target_url="https://hooks.example.com/x",
                http_status=200 if status == ResultStatus.SUCCESS else 500,
                response_body="",
                error_message=None if status == ResultStatus.SUCCESS else "receiver answered 500",
                duration_ms=1,
                attempted_at=clock.now(),
                next_attempt_at=clock.now() + timedelta(hours=1) if retry else None,
            )
            for c in claims
        ]
    )


async def recover(database: Database, customer: int, webhook_id: int, **bounds: Any) -> int:
    async with database.session() as session:
        queued = await deliveries.recover(
            session, customer_id=customer, webhook_id=webhook_id, **bounds
        )
        await session.commit()
    return queued


async def recoverable(database: Database, customer: int, webhook_id: int, **bounds: Any) -> int:
    async with database.session() as session:
        return await deliveries.count_recoverable(
            session, customer_id=customer, webhook_id=webhook_id, **bounds
        )


async def test_recovery_takes_the_events_whose_newest_attempt_failed_for_good_in_the_range(
    private_database: Database,
) -> None:
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    other_webhook = await add_webhook(private_database, customer)
    with clock.freeze() as frozen:
        since = clock.now()
        for _ in range(8):
            await publish(private_database, customer)
        claims = await claim(private_database, customer)
        ours = sorted((c for c in claims if c.webhook_id == webhook_id), key=lambda c: c.event_id)
        exhausted, failed, later_delivered, delivered, retried, requeued, too_late, too_early = ours
        await attempt(private_database, [too_early], ResultStatus.EXHAUSTED)  # just before
        frozen.advance(timedelta(milliseconds=1))  # the range's first moment: included
        await attempt(
            private_database, [exhausted, later_delivered, requeued], ResultStatus.EXHAUSTED
        )
        await attempt(private_database, [failed], ResultStatus.FAILED)
        await attempt(private_database, [delivered], ResultStatus.SUCCESS)
        await attempt(private_database, [retried], ResultStatus.PENDING_RETRY, retry=True)
        # The other webhook's deliveries of the same events all fail: not this webhook's.
        await attempt(
            private_database, [c for c in claims if c not in ours], ResultStatus.EXHAUSTED
        )
        frozen.advance(timedelta(minutes=5))
        for event in (later_delivered, requeued):
            async with private_database.session() as session:
                await deliveries.redeliver(
                    session, customer_id=customer, webhook_id=webhook_id, event_id=event.event_id
                )
                await session.commit()
        # Claimed again: these two, and the one whose lease has run out meanwhile.
        again = {c.event_id: c for c in await claim(private_database, customer)}
        await attempt(private_database, [again[later_delivered.event_id]], ResultStatus.SUCCESS)
        until = clock.now()
        frozen.advance(timedelta(milliseconds=1))
        await attempt(private_database, [again[too_late.event_id]], ResultStatus.EXHAUSTED)
        bounds = {"since": since + timedelta(milliseconds=1), "until": until}

        assert await recoverable(private_database, customer, webhook_id, **bounds) == 2
        assert await recover(private_database, customer, webhook_id, **bounds) == 2
        # Their new deliveries are pending: recovering again finds nothing.
        assert await recoverable(private_database, customer, webhook_id, **bounds) == 0
        assert await recover(private_database, customer, webhook_id, **bounds) == 0
    async with private_database.session() as session:
        queued = (
            await session.execute(
                select(Delivery.event_id, Delivery.attempts).where(
                    Delivery.webhook_id == webhook_id, Delivery.attempts == 0
                )
            )
        ).all()
    assert sorted(queued) == sorted(
        [(exhausted.event_id, 0), (failed.event_id, 0), (requeued.event_id, 0)]
    )  # the two recovered, and the redelivery queued before
    assert await recoverable(private_database, customer, other_webhook, **bounds) == 8


async def test_recovery_of_an_inactive_or_another_customers_webhook_is_refused(
    private_database: Database,
) -> None:
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer, active=False)
    now = clock.now()
    with pytest.raises(AppError) as inactive:
        await recover(private_database, customer, webhook_id, since=now, until=now)
    assert inactive.value.code == ErrorCode.WEBHOOK_INACTIVE
    # Counting is the portal's preview: an inactive webhook's failures are counted.
    assert await recoverable(private_database, customer, webhook_id, since=now, until=now) == 0
    for refused in (recover, recoverable):
        with pytest.raises(AppError) as theirs:
            await refused(private_database, new_customer_id(), webhook_id, since=now, until=now)
        assert theirs.value.code == ErrorCode.WEBHOOK_NOT_FOUND
        with pytest.raises(AppError) as too_wide:
            await refused(
                private_database,
                customer,
                webhook_id,
                since=now - timedelta(days=14, minutes=5, milliseconds=1),
                until=now,
            )
        assert too_wide.value.code == ErrorCode.INVALID_PARAMETERS


async def test_a_webhook_with_many_failed_events_recovers_them_all_once(
    private_database: Database,
) -> None:
    """A receiver down for days: more failed events than a statement may carry parameters,
    recovered by two requests at once, are each queued once."""
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    failures = 12_000
    payload = sample_payload(EventType.PIX_OUTBOUND)
    since = clock.now()
    async with private_database.session() as session:
        await deliveries.publish_events(
            session,
            [deliveries.NewEvent(customer, EventType.PIX_OUTBOUND, payload)] * failures,
        )
        # Each exhausted its schedule: its delivery gone, its last attempt recorded.
        rows = (
            await session.execute(
                delete(Delivery)
                .where(Delivery.customer_id == customer)
                .returning(Delivery.id, Delivery.event_id)
            )
        ).all()
        await session.execute(
            insert(DeliveryResult),
            [
                {
                    "delivery_id": delivery_id,
                    "customer_id": customer,
                    "webhook_id": webhook_id,
                    "event_id": event_id,
                    "event_type": "PIX_OUTBOUND",
                    "target_url": "https://hooks.example.com/x",
                    "attempt": 8,
                    "status": ResultStatus.EXHAUSTED,
                    "duration_ms": 1,
                    "attempted_at": clock.now(),
                }
                for delivery_id, event_id in rows
            ],
        )
        await session.commit()
    bounds = {"since": since, "until": clock.now()}
    assert await recoverable(private_database, customer, webhook_id, **bounds) == failures

    counts = await asyncio.gather(
        *(recover(private_database, customer, webhook_id, **bounds) for _ in range(2))
    )
    assert sorted(counts) == [0, failures]
    assert await count(private_database, Delivery, customer) == failures


async def test_a_webhooks_activity_counts_its_attempts_over_the_period_and_its_latest(
    private_database: Database,
) -> None:
    customer, other = new_customer_id(), new_customer_id()
    now = clock.now()

    def attempt(
        customer_id: int, webhook_id: int, status: str, ago: timedelta, http: int | None
    ) -> dict[str, object]:
        return {
            "delivery_id": 1,
            "customer_id": customer_id,
            "webhook_id": webhook_id,
            "event_id": "evt_1",
            "event_type": "PIX_OUTBOUND",
            "target_url": "https://hooks.example.com/",
            "attempt": 1,
            "status": status,
            "http_status": http,
            "response_body": None,
            "error_message": None,
            "duration_ms": 5,
            "attempted_at": now - ago,
            "next_attempt_at": None,
        }

    async with private_database.session() as session:
        await ResultRepository(session).add(
            [
                attempt(customer, 1, ResultStatus.SUCCESS, timedelta(hours=1), 200),
                attempt(customer, 1, ResultStatus.SUCCESS, timedelta(hours=2), 204),
                attempt(customer, 1, ResultStatus.PENDING_RETRY, timedelta(hours=3), 500),
                attempt(customer, 1, ResultStatus.EXHAUSTED, timedelta(days=3), None),
                # Older than the period: only the latest attempt could show it.
                attempt(customer, 1, ResultStatus.SUCCESS, timedelta(days=8), 200),
                # Cancelled unsent: says nothing of the receiver, but it is the latest record.
                attempt(customer, 1, ResultStatus.FAILED, timedelta(minutes=5), None),
                attempt(customer, 2, ResultStatus.PENDING_RETRY, timedelta(days=9), 503),
                attempt(other, 3, ResultStatus.SUCCESS, timedelta(minutes=1), 200),
            ]
        )
        await session.commit()
    async with private_database.read_session() as session:
        activity = await deliveries.webhook_activity(
            session,
            customer_id=customer,
            webhook_ids=[1, 2, 3, 4],
            period=timedelta(days=7),
            now=now,
        )
    assert activity[1].succeeded == 2 and activity[1].failed == 2
    assert activity[1].success_percent == 50
    assert (activity[1].last_status, activity[1].last_http_status) == ("FAILED", None)
    assert activity[1].last_attempt_at == now - timedelta(minutes=5)
    assert activity[2].attempts == 0 and activity[2].success_percent is None
    assert (activity[2].last_status, activity[2].last_http_status) == ("PENDING_RETRY", 503)
    # Another customer's webhook, and one never attempted, show nothing.
    assert activity[3] == activity[4] == NO_ACTIVITY
