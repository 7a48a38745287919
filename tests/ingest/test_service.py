"""POST /internal/v1/events with an Idempotency-Key: a publisher that retries (after a timeout,
say) gets the first answer again, and each receiver gets the event once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.support.deliveries import pix_outbound, register, results_for
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.events.payloads import PAYLOAD_MODELS
from tucano.events.types import EventType
from tucano.ingest import service as publication
from tucano.ingest.earlier_fingerprints import earlier_publication_fingerprint
from tucano.ingest.models import EventIdempotencyKey


async def post_event(
    publisher: Merchant, customer_id: int, key: str | None, **payload: Any
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["idempotency-key"] = key
    body = {
        "eventType": "PIX_OUTBOUND",
        "customerId": customer_id,
        "payload": pix_outbound(**payload),
    }
    return await publisher.post(
        "/internal/v1/events", content=json_codec.dumps(body), headers=headers
    )


async def test_a_retried_publication_is_one_event(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/once")
    key = str(uuid.uuid4())
    first = await post_event(publisher, merchant.customer_id, key, amount=Decimal("10.5"))
    assert first.status_code == 202, first.text
    assert "idempotent-replayed" not in first.headers
    # The same request, spelt otherwise (10.50): the first answer, byte for byte.
    again = await post_event(publisher, merchant.customer_id, key, amount=Decimal("10.50"))
    assert again.status_code == 202
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    await receiver.wait_for("/once", 1)
    await asyncio.sleep(0.5)
    assert len(receiver.at("/once")) == 1
    (record,) = await results_for(merchant, 1, webhookId=webhook["webhookId"])
    assert record["eventId"] == first.json()["eventId"]

    # Without a key, or with another, each request is an event of its own.
    others = [
        await post_event(publisher, merchant.customer_id, None),
        await post_event(publisher, merchant.customer_id, None),
        await post_event(publisher, merchant.customer_id, str(uuid.uuid4())),
    ]
    assert len({r.json()["eventId"] for r in [first, *others]}) == 4


async def test_the_same_key_with_another_publication_is_a_409(
    merchant: Merchant, publisher: Merchant
) -> None:
    key = "order-42/payout-1"
    assert (await post_event(publisher, merchant.customer_id, key)).status_code == 202
    other = await post_event(publisher, merchant.customer_id, key, amount=Decimal("99.00"))
    body = assert_error_body(other, 409, ErrorCode.IDEMPOTENCY_KEY_CONFLICT)
    assert "Idempotency-Key" in body["errors"][0]


async def test_keys_belong_to_one_client_and_last_a_day(
    delivery_service: RunningService, merchant: Merchant
) -> None:
    client_id, secret, customer_id = await delivery_service.client_credentials(
        scopes=[Scope.EVENTS_PUBLISH]
    )

    publisher = Merchant(
        delivery_service, customer_id, await delivery_service.token_of(client_id, secret)
    )
    other_publisher = await delivery_service.merchant(scopes=[Scope.EVENTS_PUBLISH])
    key = str(uuid.uuid4())
    first = await post_event(publisher, merchant.customer_id, key)
    theirs = await post_event(other_publisher, merchant.customer_id, key, amount=Decimal("1.00"))
    assert theirs.status_code == 202 and theirs.json()["eventId"] != first.json()["eventId"]
    with clock.freeze(clock.now() + timedelta(hours=24, seconds=1)):
        # The client's first token has expired.
        publisher.token = await delivery_service.token_of(client_id, secret)
        later = await post_event(publisher, merchant.customer_id, key, amount=Decimal("2.00"))
    assert later.status_code == 202, later.text
    assert "idempotent-replayed" not in later.headers


async def test_racing_retries_publish_one_event(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/race")
    key = str(uuid.uuid4())
    answers = await asyncio.gather(
        *(post_event(publisher, merchant.customer_id, key) for _ in range(8))
    )
    assert {a.status_code for a in answers} == {202}, [a.text for a in answers]
    assert len({a.json()["eventId"] for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 7
    await receiver.wait_for("/race", 1)
    await asyncio.sleep(0.5)
    assert len(receiver.at("/race")) == 1
    assert len(await results_for(merchant, 1, webhookId=webhook["webhookId"])) == 1


@pytest.mark.parametrize("key", ["", "a" * 256, "two words", "ção".encode()])
async def test_a_key_that_is_not_visible_ascii_is_a_400(
    merchant: Merchant, publisher: Merchant, key: str | bytes
) -> None:
    headers: dict[str, Any] = {"content-type": "application/json", "idempotency-key": key}
    body = {
        "eventType": "PIX_OUTBOUND",
        "customerId": merchant.customer_id,
        "payload": pix_outbound(),
    }
    answer = await publisher.post(
        "/internal/v1/events", content=json_codec.dumps(body), headers=headers
    )
    body = assert_error_body(answer, 400, ErrorCode.INVALID_PARAMETERS)
    assert body["errors"][0].startswith("Idempotency-Key must ")
    if key in ("two words", "ção".encode()):  # said in our words, not the validator's
        assert body["errors"] == ["Idempotency-Key must match the pattern ^[!-~]+$"]


async def test_two_keys_in_one_request_are_a_400(merchant: Merchant, publisher: Merchant) -> None:
    body = {
        "eventType": "PIX_OUTBOUND",
        "customerId": merchant.customer_id,
        "payload": pix_outbound(),
    }
    answer = await publisher.service.http.post(
        "/internal/v1/events",
        content=json_codec.dumps(body),
        headers=[
            *publisher.headers.items(),
            ("content-type", "application/json"),
            ("idempotency-key", "one"),
            ("idempotency-key", "two"),
        ],
    )
    assert assert_error_body(answer, 400, ErrorCode.INVALID_PARAMETERS)["errors"] == [
        "Idempotency-Key: give it once"
    ]


async def test_expired_publication_keys_are_pruned_in_batches(private_database: Database) -> None:
    """As the payment links' keys: a batch per run, the runner calling again while it did work."""
    long_ago = datetime(2001, 1, 1, tzinfo=UTC)
    async with private_database.session() as session:
        session.add_all(
            EventIdempotencyKey(
                client_id="client",
                key=f"key-{hours}",
                request_hash="x",
                response="{}",
                created_at=long_ago + timedelta(hours=hours),
            )
            for hours in (*range(12), 30)
        )
        await session.commit()
    pruned = []
    for _ in range(4):
        async with private_database.session() as session:
            pruned.append(
                await publication.prune_publication_keys(
                    session, now=long_ago + timedelta(hours=36), batch_size=5
                )
            )
            await session.commit()
    assert pruned == [5, 5, 2, 0]
    async with private_database.session() as session:
        left = await session.scalars(select(EventIdempotencyKey.key))
        assert list(left) == ["key-30"]


# What releases before 2026-11-24 stored for these requests (computed with their code): a retry
# after the upgrade must still be a replay, however the request was spelt.
EARLIER_LINK = {
    "paymentLinkUuid": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
    "paymentDate": "2026-01-15T10:30:00.000Z",
    "paymentMethod": "CREDIT_CARD",
    "paymentId": 123,
    "paymentReceipt": 456789,
    "amount": Decimal("30"),
    "userReference": None,
    "numbersInstallments": 3,
    "status": "PAID",
}
EARLIER_QR = {
    "txid": "abc123",
    "amount": Decimal("10.5"),
    "payer": {"documentNumber": "529.982.247-25", "name": "Ana"},
    "endToEndId": "E12345678202601151030abcdefghijk",
    "type": "PAYMENT",
    "status": "PAID",
    "paymentDate": "2026-01-15T10:30:00.000Z",
    "userReference": "order-1",
}
EARLIER_FINGERPRINTS = [
    (
        EventType.PIX_OUTBOUND,
        pix_outbound(),
        "62fe26c1ce0fb797b48532a123cf64f2cb1d7ff59fa6ed2682399346c061e9d2",
    ),
    (
        EventType.PAYMENT_LINK_INBOUND,
        EARLIER_LINK,
        "6bdced54a9e791e9bb211ed801e3752a607ead0fab9e2e464c41de2858512abb",
    ),
    (
        EventType.PIX_QR_INBOUND,
        EARLIER_QR,
        "da683b51a064d59b0bef7dbba39d0af1acde4ec331d5973e9125a2f586baabf6",
    ),
]


@pytest.mark.parametrize(("event_type", "payload", "stored_hash"), EARLIER_FINGERPRINTS)
async def test_a_key_stored_by_an_earlier_release_still_replays(
    private_database: Database, event_type: EventType, payload: dict[str, Any], stored_hash: str
) -> None:
    key = f"before-the-upgrade-{event_type.value}"
    async with private_database.session() as session:
        session.add(
            EventIdempotencyKey(
                client_id="publisher",
                key=key,
                request_hash=stored_hash,
                response='{"eventId": "evt_earlier"}',
                created_at=clock.now(),
            )
        )
        await session.commit()

    def attempt(payload: dict[str, Any]) -> Any:
        model = PAYLOAD_MODELS[event_type]
        event = deliveries.NewEvent(1, event_type, model.model_validate(payload))
        return publication.publish_once(
            private_database,
            [event],
            idempotency=publication.IdempotentPublication(
                "publisher",
                key,
                publication.publication_fingerprint(event),
                earlier_publication_fingerprint(event),
            ),
            answer=lambda published: b"{}",
        )

    assert await attempt(payload) == (b'{"eventId": "evt_earlier"}', True)
    with pytest.raises(AppError) as conflict:
        await attempt({**payload, "amount": Decimal("10.51")})
    assert conflict.value.code == ErrorCode.IDEMPOTENCY_KEY_CONFLICT
