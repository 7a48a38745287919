"""The outbox as other features use it: one transaction for the change, the event and its
deliveries; claiming under a lease; pruning. Service functions on a database of their own."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.helpers import new_customer_id
from tucano import wire
from tucano.clock import clock
from tucano.db import Database, connect_asyncpg
from tucano.deliveries import cancellation, outbox, results
from tucano.deliveries.models import Delivery, DeliveryResult, Event, ResultStatus
from tucano.deliveries.queue import (
    NOT_RETRIED,
    ClaimedDelivery,
    Outcome,
    claim_due_deliveries,
    record_outcomes,
    release_claims,
)
from tucano.pagination import PageRequest
from tucano.webhooks import service as webhooks
from tucano.webhooks.events import EventType
from tucano.webhooks.models import Webhook
from tucano.webhooks.samples import sample_payload

LEASE = timedelta(seconds=30)


async def add_webhook(database: Database, customer_id: int, *, active: bool = True) -> int:
    now = clock.now()
    async with database.session() as session:
        webhook = Webhook(
            customer_id=customer_id,
            partner_id=None,
            target_url="https://hooks.example.com/x",
            event_type="PIX_OUTBOUND",
            is_active=active,
            secret="whsec_" + "A" * 32,
            created_at=now,
            updated_at=now,
        )
        session.add(webhook)
        await session.commit()
        return webhook.id


async def publish(database: Database, customer_id: int, *, commit: bool = True) -> int:
    async with database.session() as session:
        published = await outbox.publish_event(
            session,
            customer_id=customer_id,
            event_type=EventType.PIX_OUTBOUND,
            payload=sample_payload(EventType.PIX_OUTBOUND),
        )
        await (session.commit() if commit else session.rollback())
    return published.deliveries


async def claim(database: Database, customer_id: int) -> list[ClaimedDelivery]:
    claims = (await claim_due_deliveries(database, limit=1000, lease=LEASE)).deliveries
    return [c for c in claims if c.customer_id == customer_id]


async def record_success(database: Database, claims: list[ClaimedDelivery]) -> None:
    await record_outcomes(
        database,
        [
            Outcome(
                claimed=c,
                status=ResultStatus.SUCCESS,
                target_url="https://hooks.example.com/x",
                http_status=200,
                response_body="",
                error_message=None,
                duration_ms=1,
                attempted_at=clock.now(),
                next_attempt_at=None,
            )
            for c in claims
        ],
    )


async def count(
    database: Database, model: type[Event | Delivery | DeliveryResult], customer_id: int
) -> int:
    async with database.session() as session:
        total = await session.scalar(
            select(func.count()).select_from(model).where(model.customer_id == customer_id)
        )
    return int(total or 0)


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


async def test_a_claim_is_exclusive_until_its_lease_runs_out(private_database: Database) -> None:
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        first = await claim(private_database, customer)
        assert len(first) == 1
        assert first[0].webhook_id == webhook_id and first[0].attempt == 1
        assert await claim(private_database, customer) == []
        frozen.advance(LEASE + timedelta(seconds=1))
        after_lease = await claim(private_database, customer)
        assert [c.delivery_id for c in after_lease] == [first[0].delivery_id]
        assert after_lease[0].claim_token != first[0].claim_token

        # The first worker's late outcome is kept as history but does not move the delivery.
        await record_success(private_database, first)
        async with private_database.session() as session:
            delivery = await session.get(Delivery, first[0].delivery_id)
        assert delivery is not None  # still queued: the second worker holds it
        assert delivery.claim_token == after_lease[0].claim_token
        assert await count(private_database, DeliveryResult, customer) == 1

        # The holder's success takes the delivery off the queue; both attempts stay as history.
        await record_success(private_database, after_lease)
        assert await count(private_database, Delivery, customer) == 0
        assert await count(private_database, DeliveryResult, customer) == 2


async def test_one_record_moves_each_delivery_by_its_own_outcome(
    private_database: Database,
) -> None:
    """A batch of outcomes, recorded at once: a success leaves the queue, a retry waits for its
    next time with the claim released, and a retry whose delivery left the queue meanwhile is
    recorded as not retried."""
    customer = new_customer_id()
    for _ in range(3):
        await add_webhook(private_database, customer)
    assert await publish(private_database, customer) == 3
    done, retried, vanished = sorted(
        await claim(private_database, customer), key=lambda c: c.delivery_id
    )
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

    await record_outcomes(
        private_database,
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


async def delete_webhook(database: Database, customer_id: int, webhook_id: int) -> None:
    """As DELETE /webhook/v1/{id} does it."""
    async with database.session() as session:
        await cancellation.cancel_deliveries_to(
            session,
            customer_id=customer_id,
            webhook_id=webhook_id,
            target_url="https://hooks.example.com/x",
            reason="not sent: the webhook was deleted",
        )
        await webhooks.delete_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
        await session.commit()


async def test_giving_back_claims_names_those_whose_webhook_was_deleted_meanwhile(
    private_database: Database,
) -> None:
    """A deletion leaves what a worker holds to that worker to record; a worker that gives its
    claims back instead learns which of them were cancelled, and the others are queued again."""
    customer = new_customer_id()
    kept = await add_webhook(private_database, customer)
    deleted = await add_webhook(private_database, customer)
    assert await publish(private_database, customer) == 2
    claims = {c.webhook_id: c for c in await claim(private_database, customer)}
    await delete_webhook(private_database, customer, deleted)
    assert await count(private_database, DeliveryResult, customer) == 0  # left to the holder

    cancelled = await release_claims(
        private_database, list(claims.values()), due_at=clock.now(), lease=LEASE
    )

    assert cancelled == [claims[deleted]]
    assert [c.webhook_id for c in await claim(private_database, customer)] == [kept]


async def test_a_give_back_that_ends_after_the_lease_still_names_what_the_deletion_left(
    private_database: Database,
) -> None:
    # The deletion ran under the lease (and so left the delivery to its holder); the give-back
    # ends after the lease ran out: still the holder's to record, since nobody else has.
    customer = new_customer_id()
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        (held,) = await claim(private_database, customer)
        await delete_webhook(private_database, customer, webhook_id)
        frozen.advance(LEASE + timedelta(seconds=1))
        cancelled = await release_claims(private_database, [held], due_at=clock.now(), lease=LEASE)
    assert cancelled == [held]


async def test_giving_back_claims_names_none_the_holder_need_not_record(
    private_database: Database,
) -> None:
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    await publish(private_database, customer)
    # Gone from the queue with its webhook still there: another worker finished it (once this
    # lease had run out).
    (finished,) = await claim(private_database, customer)
    async with private_database.session() as session:
        await session.delete(await session.get(Delivery, finished.delivery_id))
        await session.commit()
    assert await release_claims(private_database, [finished], due_at=clock.now(), lease=LEASE) == []

    # Its webhook deleted after the lease ran out: the deletion recorded it, once.
    webhook_id = await add_webhook(private_database, customer)
    await publish(private_database, customer)
    with clock.freeze() as frozen:
        (held,) = [c for c in await claim(private_database, customer) if c.webhook_id == webhook_id]
        frozen.advance(LEASE + timedelta(seconds=1))
        await delete_webhook(private_database, customer, webhook_id)
        assert await release_claims(private_database, [held], due_at=clock.now(), lease=LEASE) == []
    async with private_database.session() as session:
        records = list(
            await session.scalars(
                select(DeliveryResult.status).where(DeliveryResult.webhook_id == webhook_id)
            )
        )
    assert records == [ResultStatus.FAILED]


async def sweep_abandoned(database: Database) -> int:
    """The periodic job that records what a killed worker held when its webhook was deleted."""
    async with database.session() as session:
        done = await cancellation.record_abandoned_cancellations(session, now=clock.now())
        await session.commit()
    return done


async def results_of(database: Database, webhook_id: int) -> list[tuple[int, str, str | None]]:
    async with database.session() as session:
        return [
            (r.attempt, r.status, r.error_message)
            for r in await session.scalars(
                select(DeliveryResult)
                .where(DeliveryResult.webhook_id == webhook_id)
                .order_by(DeliveryResult.id)
            )
        ]


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


async def waiting_on_a_lock(admin: Any, statement_like: str) -> None:
    """Until a statement like `statement_like` waits for a row lock (PostgreSQL). A statement
    sent as an executemany shows only the `BEGIN;` before it in pg_stat_activity while it
    waits, so any other session of this database waiting on a lock counts too."""
    for _ in range(500):
        if await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database() AND pid <> pg_backend_pid() "
            "AND (query LIKE $1 OR query = 'BEGIN;')",
            statement_like,
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no statement like {statement_like!r} waited for a lock")


async def deletion_holding(admin: Any, ids: list[int]) -> Any:
    """A transaction of another session that has locked these deliveries, in this order, as a
    webhook's deletion does (cancel_deliveries_to)."""
    transaction = admin.transaction()
    await transaction.start()
    for delivery_id in ids:
        await admin.execute("SELECT id FROM deliveries WHERE id = $1 FOR UPDATE", delivery_id)
    return transaction


async def test_claims_are_given_back_in_the_order_a_deletion_locks_them(
    private_database: Database,
) -> None:
    """A give-back and a webhook's deletion lock the same deliveries in the same (id) order,
    so they wait for each other rather than deadlock (PostgreSQL would undo one of them)."""
    if private_database.dialect != "postgresql":
        pytest.skip("PostgreSQL: SQLite's writers take the whole database in turn")
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    await add_webhook(private_database, customer)
    await publish(private_database, customer)
    first, second = sorted(await claim(private_database, customer), key=lambda c: c.delivery_id)
    admin = await connect_asyncpg(private_database.url)
    try:
        deletion = await deletion_holding(admin, [first.delivery_id])
        # Given back in the worker's order, not the ids'.
        giving_back = asyncio.create_task(
            release_claims(private_database, [second, first], due_at=clock.now(), lease=LEASE)
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
    private_database: Database, meanwhile: str
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
    (held,) = await claim(private_database, customer)
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
        recording = asyncio.create_task(record_outcomes(private_database, [retry]))
        await waiting_on_a_lock(admin, "%INSERT INTO delivery_results%")
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


async def test_pruning_removes_old_history_only(private_database: Database) -> None:
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    with clock.freeze(clock.now() - timedelta(days=100)):
        await publish(private_database, customer)
        await record_success(private_database, await claim(private_database, customer))
    await publish(private_database, customer)  # recent, still pending
    assert await count(private_database, DeliveryResult, customer) == 1

    async with private_database.session() as session:
        removed = await results.prune_history(session, older_than=clock.now() - timedelta(days=90))
        await session.commit()
    assert removed >= 2  # the old result, and the old event with its finished delivery
    assert await count(private_database, DeliveryResult, customer) == 0
    assert await count(private_database, Event, customer) == 1
    assert await count(private_database, Delivery, customer) == 1


def test_money_in_payloads_keeps_two_decimals() -> None:
    payload = sample_payload(EventType.CARD_PAYMENT_INBOUND)
    payload.amount = Decimal("10.50")  # type: ignore[attr-defined]
    assert b'"amount":10.50' in wire.dumps(payload)


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


async def test_a_worker_can_give_back_more_claims_than_a_statement_takes(
    private_database: Database,
) -> None:
    """A worker at the largest concurrency holds up to 24 x 2,048 deliveries, more ids than one
    statement may carry; stopping, it gives them all back."""
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    held = 40_000
    async with private_database.session() as session:
        await outbox.publish_events(
            session,
            [
                outbox.NewEvent(
                    customer, EventType.PIX_OUTBOUND, sample_payload(EventType.PIX_OUTBOUND)
                )
                for _ in range(held)
            ],
        )
        await session.commit()
    claims = (await claim_due_deliveries(private_database, limit=held, lease=LEASE)).deliveries
    assert len(claims) == held

    cancelled = await release_claims(private_database, claims, due_at=clock.now(), lease=LEASE)

    assert cancelled == []
    async with private_database.session() as session:
        still_held = await session.scalar(
            select(func.count())
            .select_from(Delivery)
            .where(Delivery.customer_id == customer, Delivery.claim_token.is_not(None))
        )
    assert still_held == 0
