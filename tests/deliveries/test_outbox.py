"""The outbox as other features use it: one transaction for the change, the event and its
deliveries; claiming under a lease; pruning. Service functions on a database of their own."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from sqlalchemy import func, select

from tests.helpers import new_customer_id
from tucano import wire
from tucano.clock import clock
from tucano.db import Database
from tucano.deliveries import service
from tucano.deliveries.models import Delivery, DeliveryResult, Event, ResultStatus
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
        published = await service.publish_event(
            session,
            customer_id=customer_id,
            event_type=EventType.PIX_OUTBOUND,
            payload=sample_payload(EventType.PIX_OUTBOUND),
        )
        await (session.commit() if commit else session.rollback())
    return published.deliveries


async def claim(database: Database, customer_id: int) -> list[service.ClaimedDelivery]:
    claims = (await service.claim_due_deliveries(database, limit=1000, lease=LEASE)).deliveries
    return [c for c in claims if c.customer_id == customer_id]


async def record_success(database: Database, claims: list[service.ClaimedDelivery]) -> None:
    await service.record_outcomes(
        database,
        [
            service.Outcome(
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


async def test_pruning_removes_old_history_only(private_database: Database) -> None:
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    with clock.freeze(clock.now() - timedelta(days=100)):
        await publish(private_database, customer)
        await record_success(private_database, await claim(private_database, customer))
    await publish(private_database, customer)  # recent, still pending
    assert await count(private_database, DeliveryResult, customer) == 1

    async with private_database.session() as session:
        removed = await service.prune_history(session, older_than=clock.now() - timedelta(days=90))
        await session.commit()
    assert removed >= 2  # the old result, and the old event with its finished delivery
    assert await count(private_database, DeliveryResult, customer) == 0
    assert await count(private_database, Event, customer) == 1
    assert await count(private_database, Delivery, customer) == 1


def test_money_in_payloads_keeps_two_decimals() -> None:
    payload = sample_payload(EventType.CARD_PAYMENT_INBOUND)
    payload.amount = Decimal("10.50")  # type: ignore[attr-defined]
    assert b'"amount":10.50' in wire.dumps(payload)
