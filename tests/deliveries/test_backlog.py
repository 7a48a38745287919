"""The backlog /metrics reports: deliveries due (first attempts and retries alike, held ones
included) and how long the oldest has waited; those due later are not behind."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from tests.support.queue import add_webhook, claim, publish
from tests.support.service import new_customer_id
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries.backlog import delivery_backlog
from tucano.deliveries.models import Delivery


async def test_the_backlog_counts_what_is_due_and_ages_the_oldest(
    private_database: Database,
) -> None:
    assert await delivery_backlog(private_database) == (0, 0.0)
    customer = new_customer_id()
    await add_webhook(private_database, customer)
    with clock.freeze() as frozen:
        published_at = clock.now()
        for _ in range(4):
            await publish(private_database, customer)
        held = await claim(private_database, customer)
        async with private_database.session() as session:
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
        backlog = await delivery_backlog(private_database)
    # Claimed and not recorded is still due: the worker is behind on it.
    assert backlog.due == 3
    assert backlog.oldest_due_age_seconds == 90.0
