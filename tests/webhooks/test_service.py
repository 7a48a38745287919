"""The webhook service on each database: the cap on webhooks per customer holds under races."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from tests.support.service import new_customer_id
from tests.support.settings import TEST_SECRET_STORE, make_settings
from tucano.auth.tokens import MERCHANT_SCOPES, Principal
from tucano.core.errors import AppError, ErrorCode
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.events.types import EventType
from tucano.webhooks import service
from tucano.webhooks.models import Webhook
from tucano.webhooks.schemas import WebhookCreate

# A public address written in the URL: no DNS lookup, so the creates race on the count alone.
TARGET = "https://93.184.215.14/tucano"


def caller_of(customer_id: int) -> Principal:
    return Principal(
        client_id="test",
        customer_id=customer_id,
        partner_id=None,
        scopes=frozenset(MERCHANT_SCOPES),
    )


async def create_one(database: Database, caller: Principal, limit: int) -> Webhook | AppError:
    settings = make_settings(database.url, max_webhooks_per_customer=limit)
    data = WebhookCreate.model_validate(
        {"targetUrl": TARGET, "eventType": EventType.PIX_OUTBOUND.value}
    )
    async with database.session() as session:
        try:
            webhook = await service.create_webhook(
                session, caller=caller, data=data, settings=settings, secret_store=TEST_SECRET_STORE
            )
        except AppError as exc:
            return exc
        await session.commit()
        return webhook


async def test_concurrent_creates_at_the_limit_let_exactly_one_through(
    database: Database,
) -> None:
    caller = caller_of(new_customer_id())
    for _ in range(2):
        assert isinstance(await create_one(database, caller, limit=3), Webhook)
    outcomes = await asyncio.gather(*(create_one(database, caller, limit=3) for _ in range(8)))
    created = [o for o in outcomes if isinstance(o, Webhook)]
    refused = [o for o in outcomes if isinstance(o, AppError)]
    assert len(created) == 1, outcomes
    assert len(refused) == 7
    assert {e.code for e in refused} == {ErrorCode.WEBHOOK_LIMIT_REACHED}
    _, total = await service.list_webhooks(
        database,
        customer_id=caller.customer_id,
        event_type=None,
        page=PageRequest(page=0, size=20),
    )
    assert total == 3


async def someone_waits_for_a_lock(database: Database) -> bool:
    """Whether a transaction waits for an advisory lock (PostgreSQL), now."""
    async with database.read_session() as session:
        waiting = await session.scalar(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        )
    return bool(waiting)


async def test_a_create_at_the_limit_waits_for_one_in_flight_and_is_refused(
    database: Database,
) -> None:
    caller = caller_of(new_customer_id())
    assert isinstance(await create_one(database, caller, limit=2), Webhook)
    settings = make_settings(database.url, max_webhooks_per_customer=2)
    data = WebhookCreate.model_validate({"targetUrl": TARGET, "eventType": "PIX_OUTBOUND"})
    async with database.session() as first:
        # The second webhook, written but not committed: the next create must not count past it.
        await service.create_webhook(
            first, caller=caller, data=data, settings=settings, secret_store=TEST_SECRET_STORE
        )
        second = asyncio.create_task(create_one(database, caller, limit=2))
        if database.dialect == "postgresql":
            deadline = asyncio.get_running_loop().time() + 10
            while not second.done() and not await someone_waits_for_a_lock(database):
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
        # (On SQLite the second create waits for the one writer connection, which first holds.)
        await first.commit()
    outcome = await second
    assert isinstance(outcome, AppError), outcome
    assert outcome.code is ErrorCode.WEBHOOK_LIMIT_REACHED


async def test_the_limit_counts_the_customers_own_webhooks_only(database: Database) -> None:
    first, second = caller_of(new_customer_id()), caller_of(new_customer_id())
    assert isinstance(await create_one(database, first, limit=1), Webhook)
    assert isinstance(await create_one(database, second, limit=1), Webhook)
    refused = await create_one(database, first, limit=1)
    assert isinstance(refused, AppError) and refused.code is ErrorCode.WEBHOOK_LIMIT_REACHED


@pytest.mark.parametrize("limit", [1, 2])
async def test_deleting_one_makes_room_again(database: Database, limit: int) -> None:
    caller = caller_of(new_customer_id())
    made = [await create_one(database, caller, limit=limit) for _ in range(limit)]
    assert all(isinstance(m, Webhook) for m in made)
    assert isinstance(await create_one(database, caller, limit=limit), AppError)
    async with database.session() as session:
        first = made[0]
        assert isinstance(first, Webhook)
        await service.delete_webhook(session, customer_id=caller.customer_id, webhook_id=first.id)
        await session.commit()
    assert isinstance(await create_one(database, caller, limit=limit), Webhook)
