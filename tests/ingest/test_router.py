"""POST /internal/v1/events/batch: up to 500 events in one transaction, all or nothing, answered
in the order sent (decisions.md, "Publishing events in batches")."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy import func, select

from tests.support.deliveries import pix_outbound, register
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.core import json_codec
from tucano.core.errors import ErrorCode
from tucano.deliveries.models import Event


def item(customer_id: int, event_type: str = "PIX_OUTBOUND", **payload: Any) -> dict[str, Any]:
    return {"eventType": event_type, "customerId": customer_id, "payload": pix_outbound(**payload)}


async def post_batch(
    publisher: Merchant, events: list[dict[str, Any]], key: str | None = None
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["idempotency-key"] = key
    return await publisher.post(
        "/internal/v1/events/batch",
        content=json_codec.dumps({"events": events}),
        headers=headers,
    )


async def stored_events(service: RunningService) -> int:
    async with service.database.session() as session:
        return int(await session.scalar(select(func.count()).select_from(Event)) or 0)


async def test_a_batch_fans_each_event_out_and_answers_in_the_order_sent(
    delivery_service: RunningService, merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    other = await delivery_service.merchant()
    await register(merchant, receiver, "/a")
    await register(merchant, receiver, "/b")
    await register(other, receiver, "/other")
    # A webhook of another type gets none of them.
    await register(merchant, receiver, "/chargebacks", event_type="CARD_CHARGEBACK")
    events = [
        item(merchant.customer_id, transferId=f"trf_{n}", amount=Decimal(n)) for n in range(1, 4)
    ]
    events.insert(1, item(other.customer_id, transferId="trf_other"))
    answer = await post_batch(publisher, events)
    assert answer.status_code == 202, answer.text
    accepted = answer.json()["events"]
    assert [(a["customerId"], a["deliveries"]) for a in accepted] == [
        (merchant.customer_id, 2),
        (other.customer_id, 1),
        (merchant.customer_id, 2),
        (merchant.customer_id, 2),
    ]
    assert len({a["eventId"] for a in accepted}) == 4
    assert all(a["eventType"] == "PIX_OUTBOUND" for a in accepted)
    for path, count in (("/a", 3), ("/b", 3), ("/other", 1)):
        got = await receiver.wait_for(path, count)
        assert len(got) == count
    # The body is the payload itself; the event's id is the webhook-id header.
    by_event = {r.headers["webhook-id"]: json.loads(r.body) for r in receiver.at("/a")}
    assert set(by_event) == {accepted[i]["eventId"] for i in (0, 2, 3)}
    assert by_event[accepted[3]["eventId"]]["transferId"] == "trf_3"
    assert receiver.at("/chargebacks") == []


async def test_one_invalid_item_is_a_400_naming_it_and_stores_nothing(
    delivery_service: RunningService, merchant: Merchant, publisher: Merchant
) -> None:
    before = await stored_events(delivery_service)
    events = [item(merchant.customer_id) for _ in range(5)]
    events[3]["payload"]["amount"] = "dez reais"
    events[4]["payload"]["note"] = "4111 1111 1111 1111"  # a card number, in a field not named
    answer = await post_batch(publisher, events)
    body = assert_error_body(answer, 400, ErrorCode.INVALID_PARAMETERS)
    assert any(line.startswith("events[3].payload.amount ") for line in body["errors"])
    assert any(line.startswith("events[4].payload") for line in body["errors"])
    assert "4111" not in answer.text
    assert not any(
        line.startswith(("events[0]", "events[1]", "events[2]")) for line in body["errors"]
    )
    assert await stored_events(delivery_service) == before


async def test_a_batch_holds_1_to_500_events(
    delivery_service: RunningService, merchant: Merchant, publisher: Merchant
) -> None:
    empty = assert_error_body(await post_batch(publisher, []), 400, ErrorCode.INVALID_PARAMETERS)
    assert empty["errors"] == ["events must not be empty"]
    too_many = await post_batch(publisher, [item(merchant.customer_id)] * 501)
    body = assert_error_body(too_many, 400, ErrorCode.INVALID_PARAMETERS)
    assert body["errors"] == ["events must have at most 500 items"]
    full = await post_batch(publisher, [item(merchant.customer_id)] * 500)
    assert full.status_code == 202, full.text
    assert len(full.json()["events"]) == 500


async def test_an_idempotency_key_covers_the_whole_batch(
    delivery_service: RunningService, merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    await register(merchant, receiver, "/once")
    key = str(uuid.uuid4())
    events = [item(merchant.customer_id, transferId=f"trf_{n}") for n in range(3)]
    first = await post_batch(publisher, events, key)
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    before = await stored_events(delivery_service)
    again = await post_batch(publisher, events, key)
    assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert await stored_events(delivery_service) == before
    # Another batch, the same batch in another order, or one event alone: another request.
    for other in (events[:2], events[::-1]):
        conflict = await post_batch(publisher, other, key)
        assert_error_body(conflict, 409, ErrorCode.IDEMPOTENCY_KEY_CONFLICT)
    single = await publisher.post(
        "/internal/v1/events",
        content=json_codec.dumps(events[0]),
        headers={"content-type": "application/json", "idempotency-key": key},
    )
    assert_error_body(single, 409, ErrorCode.IDEMPOTENCY_KEY_CONFLICT)
    assert len(await receiver.wait_for("/once", 3)) == 3


async def test_publishing_a_batch_needs_the_events_publish_scope(
    delivery_service: RunningService, merchant: Merchant
) -> None:
    answer = await post_batch(merchant, [item(merchant.customer_id)])
    assert_error_body(answer, 403, ErrorCode.INSUFFICIENT_SCOPE)
