"""Cancellation: a deleted webhook's deliveries taken off the queue, and the last record of
those a killed worker held. Service functions on a database of their own."""

from __future__ import annotations

import asyncio

import pytest

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
from tucano.core.clock import clock
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.deliveries import cancellation, outbox, results
from tucano.deliveries.models import Delivery, DeliveryResult, ResultStatus
from tucano.deliveries.queue import (
    Outcome,
    record_outcomes,
    release_claims,
)
from tucano.events.samples import sample_payload
from tucano.events.types import EventType


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
        frozen.advance(cancellation.ABANDONED_AFTER)
        assert await sweep_abandoned(private_database) >= 1
        await sweep_abandoned(private_database)
    assert await results_of(private_database, webhook_id) == [
        (held.attempt, ResultStatus.FAILED, cancellation.ABANDONED)
    ]
    # The results list's totals count it (they add up hour counts, not rows).
    async with private_database.session() as session:
        _, total = await results.list_results(
            session,
            customer_id=customer,
            filters=results.ResultFilters(webhook_id=webhook_id),
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
            cancelled = await release_claims(
                private_database, [held], due_at=clock.now(), lease=LEASE
            )
            assert cancelled == [held]  # the worker records these as not sent
            await record_outcomes(
                private_database,
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
        frozen.advance(LEASE + cancellation.ABANDONED_AFTER)
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
        frozen.advance(LEASE + cancellation.ABANDONED_AFTER)
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
        await outbox.publish_events(
            session,
            [outbox.NewEvent(customer, EventType.PIX_OUTBOUND, payload) for _ in range(backlog)],
        )
        await session.commit()
    assert await count(private_database, Delivery, customer) == backlog

    await delete_webhook(private_database, customer, webhook_id)

    assert await count(private_database, Delivery, customer) == 0
    assert await count(private_database, DeliveryResult, customer) == backlog
