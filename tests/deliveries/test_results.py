"""The results history: pruning. Service functions on a database of their own."""

from __future__ import annotations

from datetime import timedelta

from tests.support.queue import (
    add_webhook,
    claim,
    count,
    publish,
    record_success,
)
from tests.support.service import new_customer_id
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries import results
from tucano.deliveries.models import Delivery, DeliveryResult, Event


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
