"""The outbox as other features use it: one transaction for the change, the event and its
deliveries. Service functions on a database of their own (the helpers here are shared by the
queue's, cancellation's and results' tests)."""

from __future__ import annotations

from decimal import Decimal

from tests.support.queue import add_webhook, count, publish
from tests.support.service import new_customer_id
from tucano.core import json_codec
from tucano.db.database import Database
from tucano.deliveries.models import Delivery, Event
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
