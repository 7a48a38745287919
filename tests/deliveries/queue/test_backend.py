"""The delivery queue's contract, which every back end passes (conftest.py): claiming under a
lease, recording a batch of outcomes, giving claims back. On a database of their own."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from tests.support.queue import (
    LEASE,
    add_webhook,
    claim,
    count,
    delete_webhook,
    deletion_holding,
    publish,
    record_success,
    waiting_on_a_lock,
)
from tests.support.service import new_customer_id
from tests.support.settings import TEST_SECRET_STORE
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.db.engines import connect_asyncpg
from tucano.deliveries import service as deliveries
from tucano.deliveries.models import Delivery, DeliveryResult, ResultStatus
from tucano.deliveries.queue.backend import NOT_RETRIED, ClaimedDelivery, Outcome, QueueBackend
from tucano.deliveries.queue.nats import NatsQueue
from tucano.events.samples import sample_payload
from tucano.events.types import EventType


async def test_a_claim_is_exclusive_until_its_lease_runs_out(
    private_database: Database, queue: QueueBackend
) -> None:
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        first = await claim(queue, customer)
        assert len(first) == 1
        assert first[0].webhook_id == webhook_id and first[0].attempt == 1
        assert await claim(queue, customer) == []
        frozen.advance(LEASE + timedelta(seconds=1))
        after_lease = await claim(queue, customer)
        assert [c.delivery_id for c in after_lease] == [first[0].delivery_id]
        assert after_lease[0].claim_token != first[0].claim_token

        # The first worker's late outcome is kept as history but does not move the delivery.
        await record_success(queue, first)
        async with private_database.session() as session:
            delivery = await session.get(Delivery, first[0].delivery_id)
        assert delivery is not None  # still queued: the second worker holds it
        assert delivery.claim_token == after_lease[0].claim_token
        assert await count(private_database, DeliveryResult, customer) == 1

        # The holder's success takes the delivery off the queue; both attempts stay as history.
        await record_success(queue, after_lease)
        assert await count(private_database, Delivery, customer) == 0
        assert await count(private_database, DeliveryResult, customer) == 2


async def test_one_record_moves_each_delivery_by_its_own_outcome(
    private_database: Database, queue: QueueBackend
) -> None:
    """A batch of outcomes, recorded at once: a success leaves the queue, a retry waits for its
    next time with the claim released, and a retry whose delivery left the queue meanwhile is
    recorded as not retried."""
    customer = new_customer_id()
    for _ in range(3):
        await add_webhook(private_database, customer)
    assert await publish(private_database, customer) == 3
    done, retried, vanished = sorted(await claim(queue, customer), key=lambda c: c.delivery_id)
    async with private_database.session() as session:
        await session.delete(await session.get(Delivery, vanished.delivery_id))
        await session.commit()
    now = clock.now()
    later = now + timedelta(minutes=5)

    def outcome(claimed: ClaimedDelivery, next_at: timedelta | None) -> Outcome:
        return Outcome(
            claimed=claimed,
            status=ResultStatus.SUCCESS if next_at is None else ResultStatus.PENDING_RETRY,
            target_url="https://hooks.example.com/x",
            http_status=200 if next_at is None else 503,
            response_body="",
            error_message=None if next_at is None else "HTTP 503",
            duration_ms=1,
            attempted_at=now,
            next_attempt_at=None if next_at is None else now + next_at,
        )

    await queue.record(
        [
            outcome(done, None),
            outcome(retried, timedelta(minutes=5)),
            outcome(vanished, timedelta(minutes=5)),
        ],
    )
    async with private_database.session() as session:
        queue = list(
            await session.scalars(select(Delivery).where(Delivery.customer_id == customer))
        )
        results = {
            r.delivery_id: r
            for r in await session.scalars(
                select(DeliveryResult).where(DeliveryResult.customer_id == customer)
            )
        }
    assert [(d.id, d.attempts, d.claim_token, d.next_attempt_at) for d in queue] == [
        (retried.delivery_id, 1, None, later)
    ]
    assert results[done.delivery_id].status == ResultStatus.SUCCESS
    assert results[retried.delivery_id].status == ResultStatus.PENDING_RETRY
    assert results[retried.delivery_id].next_attempt_at == later
    gone = results[vanished.delivery_id]
    assert gone.status == ResultStatus.FAILED and gone.next_attempt_at is None
    assert gone.error_message == "HTTP 503" + NOT_RETRIED


@pytest.mark.parametrize("error_message", ["receiver answered HTTP 500", None])
async def test_a_retry_whose_delivery_vanished_is_recorded_failed_and_says_why(
    private_database: Database, queue: QueueBackend, error_message: str | None
) -> None:
    """A retry whose delivery left the queue while it was attempted (its webhook deleted, the
    delivery cancelled) will not happen: FAILED, no next time, NOT_RETRIED after its error, or
    alone when it had none, on either database."""
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    (held,) = await claim(queue, customer)
    await delete_webhook(private_database, customer, webhook_id)
    now = clock.now()
    await queue.record(
        [
            Outcome(
                claimed=held,
                status=ResultStatus.PENDING_RETRY,
                target_url="https://hooks.example.com/x",
                http_status=None,
                response_body=None,
                error_message=error_message,
                duration_ms=1,
                attempted_at=now,
                next_attempt_at=now + timedelta(minutes=5),
            )
        ],
    )
    async with private_database.session() as session:
        (record,) = await session.scalars(
            select(DeliveryResult).where(DeliveryResult.delivery_id == held.delivery_id)
        )
    assert record.status == ResultStatus.FAILED and record.next_attempt_at is None
    assert record.error_message == (error_message or "") + NOT_RETRIED
    assert await count(private_database, Delivery, customer) == 0


async def test_giving_back_claims_names_those_whose_webhook_was_deleted_meanwhile(
    private_database: Database, queue: QueueBackend
) -> None:
    """A deletion leaves what a worker holds to that worker to record; a worker that gives its
    claims back instead learns which of them were cancelled, and the others are queued again."""
    customer = new_customer_id()
    kept = await add_webhook(private_database, customer)
    deleted = await add_webhook(private_database, customer)
    assert await publish(private_database, customer) == 2
    claims = {c.webhook_id: c for c in await claim(queue, customer)}
    await delete_webhook(private_database, customer, deleted)
    assert await count(private_database, DeliveryResult, customer) == 0  # left to the holder

    cancelled = await queue.release(list(claims.values()), due_at=clock.now(), lease=LEASE)

    assert cancelled == [claims[deleted]]
    assert [c.webhook_id for c in await claim(queue, customer)] == [kept]


async def test_a_give_back_that_ends_after_the_lease_still_names_what_the_deletion_left(
    private_database: Database, queue: QueueBackend
) -> None:
    # The deletion ran under the lease (and so left the delivery to its holder); the give-back
    # ends after the lease ran out: still the holder's to record, since nobody else has.
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        (held,) = await claim(queue, customer)
        await delete_webhook(private_database, customer, webhook_id)
        frozen.advance(LEASE + timedelta(seconds=1))
        cancelled = await queue.release([held], due_at=clock.now(), lease=LEASE)
    assert cancelled == [held]


async def test_giving_back_claims_names_none_the_holder_need_not_record(
    private_database: Database, queue: QueueBackend
) -> None:
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    await publish(private_database, customer)
    # Gone from the queue with its webhook still there: another worker finished it (once this
    # lease had run out).
    (finished,) = await claim(queue, customer)
    async with private_database.session() as session:
        await session.delete(await session.get(Delivery, finished.delivery_id))
        await session.commit()
    assert await queue.release([finished], due_at=clock.now(), lease=LEASE) == []

    # Its webhook deleted after the lease ran out: the deletion recorded it, once.
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        (held,) = [c for c in await claim(queue, customer) if c.webhook_id == webhook_id]
        frozen.advance(LEASE + timedelta(seconds=1))
        await delete_webhook(private_database, customer, webhook_id)
        assert await queue.release([held], due_at=clock.now(), lease=LEASE) == []
    async with private_database.session() as session:
        records = list(
            await session.scalars(
                select(DeliveryResult.status).where(DeliveryResult.webhook_id == webhook_id)
            )
        )
    assert records == [ResultStatus.FAILED]


async def test_claims_are_given_back_in_the_order_a_deletion_locks_them(
    private_database: Database, queue: QueueBackend
) -> None:
    """A give-back and a webhook's deletion lock the same deliveries in the same (id) order,
    so they wait for each other rather than deadlock (PostgreSQL would undo one of them)."""
    if private_database.dialect != "postgresql":
        pytest.skip("PostgreSQL: SQLite's writers take the whole database in turn")
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    await add_webhook(private_database, customer)
    await publish(private_database, customer)
    first, second = sorted(await claim(queue, customer), key=lambda c: c.delivery_id)
    admin = await connect_asyncpg(private_database.url)
    try:
        deletion = await deletion_holding(admin, [first.delivery_id])
        # Given back in the worker's order, not the ids'.
        giving_back = asyncio.create_task(
            queue.release([second, first], due_at=clock.now(), lease=LEASE)
        )
        await waiting_on_a_lock(admin, "UPDATE deliveries%")
        # The deletion goes on to its next row: free, since the give-back waits at the first.
        await asyncio.wait_for(
            admin.execute("SELECT id FROM deliveries WHERE id = $1 FOR UPDATE", second.delivery_id),
            5,
        )
        await deletion.rollback()
        assert await asyncio.wait_for(giving_back, 5) == []
    finally:
        await admin.close()


@pytest.mark.parametrize("meanwhile", ["deleted", "claimed by another", "given back"])
async def test_a_retry_is_recorded_by_what_the_queue_holds_once_its_row_is_locked(
    private_database: Database, queue: QueueBackend, meanwhile: str
) -> None:
    """PostgreSQL: the record reads the queue as it was when its statement began; what another
    session committed while the record waited for the row lock decides. Removed (a webhook's
    deletion): the retry will not happen, and the record says so rather than leave the history
    at PENDING_RETRY. Claimed by another worker, or given back (this lease ran out): the retry
    does happen, and the record says PENDING_RETRY, moving nothing."""
    if private_database.dialect != "postgresql":
        pytest.skip("PostgreSQL: SQLite's writers take the whole database in turn")
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    await publish(private_database, customer)
    (held,) = await claim(queue, customer)
    now = clock.now()
    retry = Outcome(
        claimed=held,
        status=ResultStatus.PENDING_RETRY,
        target_url="https://hooks.example.com/x",
        http_status=500,
        response_body="",
        error_message="receiver answered HTTP 500",
        duration_ms=1,
        attempted_at=now,
        next_attempt_at=now + timedelta(minutes=5),
    )
    admin = await connect_asyncpg(private_database.url)
    try:
        other_session = await deletion_holding(admin, [held.delivery_id])
        recording = asyncio.create_task(queue.record([retry]))
        await waiting_on_a_lock(admin, "%FROM deliveries%FOR UPDATE%")
        if meanwhile == "deleted":
            await admin.execute("DELETE FROM deliveries WHERE id = $1", held.delivery_id)
        else:
            token = "theirs" if meanwhile == "claimed by another" else None
            await admin.execute(
                "UPDATE deliveries SET claim_token = $2 WHERE id = $1", held.delivery_id, token
            )
        await other_session.commit()
        await asyncio.wait_for(recording, 5)
    finally:
        await admin.close()
    async with private_database.session() as session:
        (record,) = await session.scalars(
            select(DeliveryResult).where(DeliveryResult.delivery_id == held.delivery_id)
        )
        queued = await session.get(Delivery, held.delivery_id)
    if meanwhile == "deleted":
        assert record.status == ResultStatus.FAILED and record.next_attempt_at is None
        assert record.error_message == "receiver answered HTTP 500" + NOT_RETRIED
    else:
        assert record.status == ResultStatus.PENDING_RETRY
        assert queued is not None and queued.attempts == 0  # not this worker's to move
        assert queued.claim_token == ("theirs" if meanwhile == "claimed by another" else None)


async def test_a_worker_can_give_back_more_claims_than_a_statement_takes(
    private_database: Database, queue: QueueBackend
) -> None:
    """A worker at the largest concurrency holds up to 24 x 2,048 deliveries, more ids than one
    statement may carry; stopping, it gives them all back."""
    if isinstance(queue, NatsQueue):
        pytest.skip("the database's give-back (NatsQueue's own): 40,000 relayed would take long")
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    held = 40_000
    async with private_database.session() as session:
        await deliveries.publish_events(
            session,
            [
                deliveries.NewEvent(
                    customer, EventType.PIX_OUTBOUND, sample_payload(EventType.PIX_OUTBOUND)
                )
                for _ in range(held)
            ],
        )
        await session.commit()
    claims = (await queue.claim(secret_store=TEST_SECRET_STORE, limit=held, lease=LEASE)).deliveries
    assert len(claims) == held

    cancelled = await queue.release(claims, due_at=clock.now(), lease=LEASE)

    assert cancelled == []
    async with private_database.session() as session:
        still_held = await session.scalar(
            select(func.count())
            .select_from(Delivery)
            .where(Delivery.customer_id == customer, Delivery.claim_token.is_not(None))
        )
    assert still_held == 0
