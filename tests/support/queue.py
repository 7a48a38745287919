"""Delivery tests at the database: webhooks, events, claims and records made by the services."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from tests.support.settings import TEST_SECRET_STORE
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.deliveries.models import Delivery, DeliveryResult, Event, ResultStatus
from tucano.deliveries.queue import queue_for
from tucano.deliveries.queue.backend import Claim, ClaimedDelivery, Outcome, QueueBackend
from tucano.deliveries.queue.nats import NatsQueue
from tucano.events.samples import sample_payload
from tucano.events.types import EventType
from tucano.webhooks.models import Webhook

LEASE = timedelta(seconds=30)


class RelayingNatsQueue(NatsQueue):
    """The NATS back end with its relay run in step: each claim first relays what is due, as
    the relay of a running worker would have by then (the relay's own loop is tested in
    tests/deliveries/queue/test_nats.py)."""

    async def claim(self, **arguments: Any) -> Claim:
        await self.relay.relay_due(arguments["limit"])
        return await super().claim(**arguments)


async def add_webhook(database: Database, customer_id: int, *, active: bool = True) -> int:
    now = clock.now()
    async with database.session() as session:
        webhook = Webhook(
            customer_id=customer_id,
            partner_id=None,
            target_url="https://hooks.example.com/x",
            event_type="PIX_OUTBOUND",
            is_active=active,
            secret="",
            created_at=now,
            updated_at=now,
        )
        session.add(webhook)
        await session.flush()
        TEST_SECRET_STORE.seal(webhook, secret="whsec_" + "A" * 32, previous_secrets=None)
        await session.commit()
        return webhook.id


async def publish(database: Database, customer_id: int, *, commit: bool = True) -> int:
    async with database.session() as session:
        published = await deliveries.publish_event(
            session,
            customer_id=customer_id,
            event_type=EventType.PIX_OUTBOUND,
            payload=sample_payload(EventType.PIX_OUTBOUND),
        )
        await (session.commit() if commit else session.rollback())
    return published.deliveries


def queue_of(database: Database | QueueBackend) -> QueueBackend:
    """The queue a test works on: a back end given, or the one `database` runs on."""
    return queue_for(database) if isinstance(database, Database) else database


async def claim(database: Database | QueueBackend, customer_id: int) -> list[ClaimedDelivery]:
    claims = (
        await queue_of(database).claim(secret_store=TEST_SECRET_STORE, limit=1000, lease=LEASE)
    ).deliveries
    return [c for c in claims if c.customer_id == customer_id]


async def record_success(database: Database | QueueBackend, claims: list[ClaimedDelivery]) -> None:
    await queue_of(database).record(
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


async def delete_webhook(database: Database, customer_id: int, webhook_id: int) -> None:
    """As DELETE /webhook/v1/{id} does it."""
    async with database.session() as session:
        await deliveries.delete_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
        await session.commit()


async def sweep_abandoned(database: Database) -> int:
    """The periodic job that records what a killed worker held when its webhook was deleted."""
    async with database.session() as session:
        done = await deliveries.record_abandoned_cancellations(session, now=clock.now())
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
    webhook's deletion does (deliveries.service.delete_webhook)."""
    transaction = admin.transaction()
    await transaction.start()
    for delivery_id in ids:
        await admin.execute("SELECT id FROM deliveries WHERE id = $1 FOR UPDATE", delivery_id)
    return transaction
