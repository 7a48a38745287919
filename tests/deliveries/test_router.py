"""The delivery engine end to end: real receivers on loopback, a real worker, both databases."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support import receivers
from tests.support.deliveries import (
    eventually,
    pix_outbound,
    publish,
    register,
    results,
    results_for,
)
from tests.support.receivers import Received, Receiver, always, failing_then_ok, hanging
from tests.support.service import EMPTY_PAGE, Merchant, RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.core import json_codec
from tucano.core.errors import ErrorCode
from tucano.deliveries.worker import attempts
from tucano.events.payloads import PAYLOAD_MODELS
from tucano.events.samples import sample_payload
from tucano.events.types import EventType

RESULT_FIELDS = {
    "resultId",
    "webhookId",
    "eventId",
    "eventType",
    "targetUrl",
    "attempt",
    "status",
    "httpStatus",
    "responseBody",
    "errorMessage",
    "durationMs",
    "attemptedAt",
    "nextAttemptAt",
}


def verify(secret: str, request: Any) -> Any:
    """What a merchant's receiver does with the standardwebhooks library."""
    return StandardWebhook(secret).verify(request.body, request.headers)


async def test_a_delivery_is_signed_per_standard_webhooks(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/signed")
    accepted = await publish(publisher, merchant.customer_id, pix_outbound(Decimal("1234.50")))
    assert accepted["deliveries"] == 1
    assert accepted["eventId"].startswith("evt_")

    (request,) = await receiver.wait_for("/signed", 1)
    assert verify(webhook["secret"], request)["amount"] == 1234.5
    assert request.headers["webhook-id"] == accepted["eventId"]
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 30
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-event-type"] == "PIX_OUTBOUND"
    assert request.headers["user-agent"].startswith("Tucano-Webhooks/")
    # The body is the payload itself, no envelope, money with two decimals.
    assert b'"amount":1234.50' in request.body
    body = json.loads(request.body)
    assert body["endToEndId"] == "E13935893202601151030A1B2C3D4E5F"
    assert body["transferDate"] == "2026-01-15T10:30:00.000Z"


async def test_a_delivery_sends_the_payload_as_it_was_published(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    """Fields no model names are carried, optional ones left out stay out, identifiers keep
    their JSON type: the receiver parses exactly what the publisher sent."""
    await register(merchant, receiver, "/as-published", event_type="CARD_CHARGEBACK")
    payload = {
        "creditCardId": 987654,
        "amount": 120.5,
        "identificationTransaction": "TX-1",
        "cancelationDate": "2026-01-20T12:00:00.000Z",
        "transactionDate": "2026-01-02T09:15:00.000Z",
        "additionalData": {"name": "ANA", "document": "529.982.247-25"},
        "channel": "ECOMMERCE",
    }
    await publish(publisher, merchant.customer_id, payload, event_type="CARD_CHARGEBACK")

    (request,) = await receiver.wait_for("/as-published", 1)
    assert json.loads(request.body) == payload
    assert b'"amount":120.50' in request.body


async def test_a_forged_or_altered_delivery_does_not_verify(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/tamper")
    other = await register(merchant, receiver, "/other")
    await publish(publisher, merchant.customer_id)
    (request,) = await receiver.wait_for("/tamper", 1)
    from standardwebhooks.webhooks import WebhookVerificationError

    with pytest.raises(WebhookVerificationError):
        StandardWebhook(other["secret"]).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(webhook["secret"]).verify(
            request.body.replace(b"10.50", b"99.50"), request.headers
        )


async def test_only_active_matching_webhooks_of_the_same_customer_receive(
    delivery_service: RunningService, publisher: Merchant, receiver: Receiver
) -> None:
    owner = await delivery_service.merchant()
    stranger = await delivery_service.merchant()
    await register(owner, receiver, "/match")
    await register(owner, receiver, "/match-too")
    await register(owner, receiver, "/inactive", isActive=False)
    await register(owner, receiver, "/other-type", event_type="CARD_CHARGEBACK")
    await register(stranger, receiver, "/stranger")

    accepted = await publish(publisher, owner.customer_id)
    assert accepted["deliveries"] == 2
    await receiver.wait_for("/match", 1)
    await receiver.wait_for("/match-too", 1)
    await asyncio.sleep(0.5)
    assert {r.path for r in receiver.received} == {"/match", "/match-too"}


async def test_failures_are_retried_on_the_schedule_and_every_attempt_recorded(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/flaky"] = failing_then_ok(2, status=500)
    webhook = await register(merchant, receiver, "/flaky")
    accepted = await publish(publisher, merchant.customer_id)

    requests = await receiver.wait_for("/flaky", 3)
    assert {r.headers["webhook-id"] for r in requests} == {accepted["eventId"]}
    for request in requests:
        verify(webhook["secret"], request)
    gaps = [b.at - a.at for a, b in itertools.pairwise(requests)]
    assert 0.25 <= gaps[0] < 1.5  # 300 ms +- 10% jitter, plus processing
    assert 0.5 <= gaps[1] < 2.0  # 600 ms

    records = await results_for(merchant, 3, webhookId=webhook["webhookId"])
    assert set(records[0]) == RESULT_FIELDS
    assert [r["attempt"] for r in records] == [3, 2, 1]  # newest first
    assert [r["status"] for r in records] == ["SUCCESS", "PENDING_RETRY", "PENDING_RETRY"]
    assert [r["httpStatus"] for r in records] == [200, 500, 500]
    assert records[0]["nextAttemptAt"] is None
    for failed in records[1:]:
        assert failed["nextAttemptAt"] > failed["attemptedAt"]
        assert failed["errorMessage"] == "receiver answered HTTP 500"
    for record in records:
        assert record["eventId"] == accepted["eventId"]
        assert record["eventType"] == "PIX_OUTBOUND"
        assert record["targetUrl"] == receiver.url("/flaky")
        assert record["responseBody"] == "ok"
        assert record["durationMs"] >= 0
        assert record["attemptedAt"].endswith("Z") and len(record["attemptedAt"]) == 24


async def test_after_the_last_attempt_the_delivery_is_exhausted(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/down"] = always(503, "maintenance")
    webhook = await register(merchant, receiver, "/down")
    await publish(publisher, merchant.customer_id)
    records = await results_for(merchant, 3, webhookId=webhook["webhookId"])
    assert [r["status"] for r in records] == ["EXHAUSTED", "PENDING_RETRY", "PENDING_RETRY"]
    assert records[0]["nextAttemptAt"] is None
    assert records[0]["responseBody"] == "maintenance"
    await asyncio.sleep(1.5)
    assert len(receiver.at("/down")) == 3  # the schedule has two delays: three attempts


async def test_retry_after_is_honoured(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/busy"] = failing_then_ok(1, status=429, **{"Retry-After": "1"})
    await register(merchant, receiver, "/busy")
    await publish(publisher, merchant.customer_id)
    first, second = await receiver.wait_for("/busy", 2)
    assert second.at - first.at >= 0.95  # not the 300 ms of the schedule


async def test_a_retry_after_beyond_any_clock_is_capped_like_any_other(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    # More seconds than a timedelta holds: capped at TUCANO_RETRY_AFTER_MAX_SECONDS (2 s here),
    # and recorded, like any long Retry-After.
    receiver.behaviours["/forever"] = always(503, **{"Retry-After": "99999999999999"})
    webhook = await register(merchant, receiver, "/forever")
    await publish(publisher, merchant.customer_id)
    (record, *_) = await results_for(merchant, 1, webhookId=webhook["webhookId"])
    assert record["status"] == "PENDING_RETRY" and record["httpStatus"] == 503
    wait = datetime.fromisoformat(record["nextAttemptAt"]) - datetime.fromisoformat(
        record["attemptedAt"]
    )
    assert timedelta(seconds=1.9) <= wait <= timedelta(seconds=2.5), wait


async def test_an_attempt_that_fails_inside_tucano_is_recorded_and_retried_on_schedule(
    merchant: Merchant, publisher: Merchant, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_kwargs: Any) -> dict[str, str]:
        raise RuntimeError("a fault in Tucano")

    monkeypatch.setattr(attempts, "delivery_headers", broken)
    webhook = await register(merchant, receiver, "/never")
    await publish(publisher, merchant.customer_id)
    records = await results_for(merchant, 3, webhookId=webhook["webhookId"])
    # The schedule's three attempts, each recorded, then no more: not resent at every lease.
    assert [r["status"] for r in records] == ["EXHAUSTED", "PENDING_RETRY", "PENDING_RETRY"]
    assert all("internal error in Tucano" in r["errorMessage"] for r in records)
    assert [r["attempt"] for r in records] == [3, 2, 1]
    assert receiver.at("/never") == []
    # Tucano's fault, not the receiver's: nothing toward switching the webhook off.
    path = f"/webhook/v1/{webhook['webhookId']}/delivery-status"
    assert (await merchant.get(path)).json()["failingSince"] is None


async def test_redirects_are_not_followed(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/moved"] = always(302, "", Location=receiver.url("/elsewhere"))
    webhook = await register(merchant, receiver, "/moved")
    await publish(publisher, merchant.customer_id)
    (record, *_) = await results_for(merchant, 1, webhookId=webhook["webhookId"])
    assert record["httpStatus"] == 302
    assert record["status"] == "PENDING_RETRY"
    assert "redirects are not followed" in record["errorMessage"]
    assert receiver.at("/elsewhere") == []


async def test_only_the_first_kib_of_the_answer_is_kept(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/chatty"] = always(200, "é" * 5000)
    webhook = await register(merchant, receiver, "/chatty")
    await publish(publisher, merchant.customer_id)
    (record,) = await results_for(merchant, 1, webhookId=webhook["webhookId"])
    assert record["status"] == "SUCCESS"
    assert len(record["responseBody"].encode()) <= 1024 + 3
    assert record["responseBody"].startswith("éé")


async def test_a_receiver_that_does_not_answer_in_time_is_a_failed_attempt(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/slow"] = hanging(5)
    webhook = await register(merchant, receiver, "/slow")
    await publish(publisher, merchant.customer_id)
    (record, *_) = await results_for(merchant, 1, timeout=10, webhookId=webhook["webhookId"])
    assert record["httpStatus"] is None
    assert "timed out after 1.5 s" in record["errorMessage"]
    assert 1400 <= record["durationMs"] < 3000


async def test_a_connection_refused_is_recorded(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    closed = Receiver()
    await closed.start()
    url = closed.url("/gone")
    await closed.stop()
    response = await merchant.post(
        "/webhook/v1/create", json={"targetUrl": url, "eventType": "PIX_OUTBOUND"}
    )
    webhook = response.json()
    await publish(publisher, merchant.customer_id)
    (record, *_) = await results_for(merchant, 1, webhookId=webhook["webhookId"])
    assert record["httpStatus"] is None
    assert record["errorMessage"].startswith("could not connect")


async def test_rotated_secret_signs_beside_the_new_one(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/rotated")
    rotated = (await merchant.post(f"/webhook/v1/{webhook['webhookId']}/secret/rotate")).json()
    await publish(publisher, merchant.customer_id)
    (request,) = await receiver.wait_for("/rotated", 1)
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    verify(webhook["secret"], request)
    verify(rotated["secret"], request)


async def test_every_secret_replaced_within_24_hours_keeps_signing(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/rotated-thrice")
    url = f"/webhook/v1/{webhook['webhookId']}/secret/rotate"
    # Concurrent rotations too: each answer names a secret that really signs.
    answers = await asyncio.gather(*(merchant.post(url) for _ in range(3)))
    assert all(answer.status_code == 200 for answer in answers)
    await publish(publisher, merchant.customer_id)
    (request,) = await receiver.wait_for("/rotated-thrice", 1)
    assert len(request.headers["webhook-signature"].split(" ")) == 4
    for secret in [webhook["secret"], *(answer.json()["secret"] for answer in answers)]:
        verify(secret, request)


async def test_a_hanging_target_does_not_hold_back_a_healthy_one(
    delivery_service: RunningService, publisher: Merchant, receiver: Receiver
) -> None:
    slow_owner = await delivery_service.merchant()
    fast_owner = await delivery_service.merchant()
    slow = Receiver(behaviours={"/hang": hanging(30)})
    await slow.start()
    try:
        await register(slow_owner, slow, "/hang")
        for _ in range(40):  # far more than the per-target cap
            await publish(publisher, slow_owner.customer_id)
        await slow.wait_for("/hang", 8)
        started = time.monotonic()
        for _ in range(10):
            await register(fast_owner, receiver, "/healthy")
        await publish(publisher, fast_owner.customer_id)
        await receiver.wait_for("/healthy", 10, timeout=5)
        assert time.monotonic() - started < 3
        # The hanging target never had more than its cap of requests open at once.
        assert slow.most_open["/hang"] == delivery_service.settings.delivery_concurrency_per_target
    finally:
        await slow.stop()


async def test_the_events_endpoint_validates_payloads(
    merchant: Merchant, publisher: Merchant
) -> None:
    bad = pix_outbound(amount=Decimal("10.555"), status="DONE", endToEndId="")
    bad["receiver"]["documentNumber"] = "123"
    del bad["transferDate"]
    response = await publisher.post(
        "/internal/v1/events",
        json={"eventType": "PIX_OUTBOUND", "customerId": merchant.customer_id, "payload": {}},
    )
    assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    response = await publisher.post(
        "/internal/v1/events",
        content=json_codec.dumps(
            {"eventType": "PIX_OUTBOUND", "customerId": merchant.customer_id, "payload": bad}
        ),
        headers={"content-type": "application/json"},
    )
    errors = assert_error_body(response, 400)["errors"]
    for expected in (
        "payload.amount must have at most 2 decimal places",
        "payload.status must be one of",
        "payload.endToEndId",
        "payload.receiver.documentNumber",
        "payload.transferDate is required",
    ):
        assert any(line.startswith(expected) for line in errors), (expected, errors)
    # A field no model names is carried, unless it holds a card number.
    with_card = pix_outbound(card={"number": "4111 1111 1111 1111"})
    response = await publisher.post(
        "/internal/v1/events",
        content=json_codec.dumps(
            {"eventType": "PIX_OUTBOUND", "customerId": merchant.customer_id, "payload": with_card}
        ),
        headers={"content-type": "application/json"},
    )
    assert assert_error_body(response, 400)["errors"] == [
        "payload has a card number at card.number, which no event may carry (name a card by "
        "its brand and last four digits)"
    ]
    # Whole numbers past 64 bits, named or not: a 400, not a fault in writing them out.
    for field in ("transferId", "orderNumber"):
        huge = pix_outbound(**{field: 2**70})
        response = await publisher.post(
            "/internal/v1/events",
            content=json.dumps(
                {"eventType": "PIX_OUTBOUND", "customerId": merchant.customer_id, "payload": huge},
                default=str,
            ),
            headers={"content-type": "application/json"},
        )
        errors = assert_error_body(response, 400)["errors"]
        assert any(field in line for line in errors), errors


DEVOLUTION_ID = "D13935893202611231030A1B2C3D4E5F"


@pytest.mark.parametrize(
    ("kind", "devolution", "expected"),
    [
        ("REFUND", None, ["payload.type is REFUND, which needs devolutionEndToEndId"]),
        (
            "PAYMENT",
            DEVOLUTION_ID,
            ["payload.type is PAYMENT; devolutionEndToEndId is for refunds only"],
        ),
        ("REFUND", DEVOLUTION_ID, None),
    ],
)
async def test_a_pix_qr_refund_and_only_a_refund_names_its_devolution(
    merchant: Merchant,
    publisher: Merchant,
    kind: str,
    devolution: str | None,
    expected: list[str] | None,
) -> None:
    payload = sample_payload(EventType.PIX_QR_INBOUND).model_dump(by_alias=True)
    payload.update(type=kind, devolutionEndToEndId=devolution, status="REFUNDED")
    response = await publisher.post(
        "/internal/v1/events",
        content=json_codec.dumps(
            {"eventType": "PIX_QR_INBOUND", "customerId": merchant.customer_id, "payload": payload}
        ),
        headers={"content-type": "application/json"},
    )
    if expected is None:
        assert response.status_code == 202, response.text
    else:
        assert assert_error_body(response, 400)["errors"] == expected


NOT_ISO_TEXT = "must be an ISO 8601 date and time, such as 2026-01-15T10:30:00.000Z"
OUT_OF_RANGE = "is out of range once converted to UTC"


@pytest.mark.parametrize(
    ("moment", "problem"),
    [
        # Lax parsing would read numbers, and digits in a string, as Unix seconds.
        *[(m, NOT_ISO_TEXT) for m in (0, 1.5, 1795500000, "1795500000", "20260115", True)],
        ("0001-01-01T00:00:00.000+01:00", OUT_OF_RANGE),
        ("9999-12-31T23:59:59.999-01:00", OUT_OF_RANGE),
    ],
)
async def test_an_event_date_is_iso_8601_text_that_utc_can_hold(
    merchant: Merchant, publisher: Merchant, moment: object, problem: str
) -> None:
    response = await publisher.post(
        "/internal/v1/events",
        content=json_codec.dumps(
            {
                "eventType": "PIX_OUTBOUND",
                "customerId": merchant.customer_id,
                "payload": pix_outbound(transferDate=moment),
            }
        ),
        headers={"content-type": "application/json"},
    )
    errors = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)["errors"]
    assert errors == [f"payload.transferDate {problem}"], errors


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"eventType": "NOPE", "customerId": 1, "payload": {}}, "eventType must be one of"),
        (
            {"eventType": "PIX_OUTBOUND", "customerId": 0, "payload": {}},
            "customerId must be greater",
        ),
        (
            {"eventType": "PIX_OUTBOUND", "customerId": "1", "payload": {}},
            "customerId must be an integer",
        ),
        (
            {"eventType": "PIX_OUTBOUND", "customerId": 1, "payload": []},
            "payload must be a JSON object",
        ),
        ({"eventType": "PIX_OUTBOUND", "customerId": 1}, "payload is required"),
    ],
)
async def test_the_events_endpoint_validates_its_envelope(
    publisher: Merchant, body: dict[str, Any], message: str
) -> None:
    errors = assert_error_body(await publisher.post("/internal/v1/events", json=body), 400)[
        "errors"
    ]
    assert any(line.startswith(message) for line in errors), errors


async def test_publishing_needs_the_events_publish_scope(merchant: Merchant) -> None:
    response = await merchant.post(
        "/internal/v1/events",
        json={"eventType": "PIX_OUTBOUND", "customerId": merchant.customer_id, "payload": {}},
    )
    error = assert_error_body(response, 403, ErrorCode.INSUFFICIENT_SCOPE)
    assert "events.publish" in error["errors"][0]


@pytest.mark.parametrize(
    "event_type",
    [
        "PIX_OUTBOUND",
        "PIX_QR_INBOUND",
        "PIX_QR_PARTNER_INBOUND",
        "CARD_PAYMENT_INBOUND",
        "CARD_CHARGEBACK",
        "CARD_RECURRING_INBOUND",
        "PAYMENT_LINK_INBOUND",
    ],
)
async def test_sandbox_test_events_reach_the_callers_webhooks(
    delivery_service: RunningService, receiver: Receiver, event_type: str
) -> None:
    merchant = await delivery_service.merchant(partner_id=12)
    webhook = await register(merchant, receiver, f"/sample/{event_type}", event_type=event_type)
    response = await merchant.post("/webhook/v1/test-events", json={"eventType": event_type})
    assert response.status_code == 202, response.text
    assert response.json()["deliveries"] == 1
    (request,) = await receiver.wait_for(f"/sample/{event_type}", 1)
    payload = verify(webhook["secret"], request)
    PAYLOAD_MODELS[EventType(event_type)].model_validate(payload)
    assert request.headers["x-event-type"] == event_type


@pytest.mark.parametrize(
    ("event_type", "variant"), [("PAYMENT_LINK_INBOUND", "REFUNDED"), ("PIX_QR_INBOUND", "REFUND")]
)
async def test_a_test_event_of_a_variant_reaches_the_callers_webhooks_signed(
    merchant: Merchant, receiver: Receiver, event_type: str, variant: str
) -> None:
    webhook = await register(merchant, receiver, f"/variant/{variant}", event_type=event_type)
    response = await merchant.post(
        "/webhook/v1/test-events", json={"eventType": event_type, "variant": variant}
    )
    assert response.status_code == 202, response.text
    (request,) = await receiver.wait_for(f"/variant/{variant}", 1)
    payload = verify(webhook["secret"], request)
    PAYLOAD_MODELS[EventType(event_type)].model_validate(payload)
    assert request.headers["x-event-type"] == event_type
    if variant == "REFUNDED":
        assert payload["status"] == "REFUNDED"
        assert payload["refund"]["status"] == "SUCCEEDED"
        assert payload["refundedAmount"] == payload["refund"]["amount"] == payload["amount"]
        assert payload["paymentReceipt"].startswith("E")
    else:
        assert (payload["type"], payload["status"]) == ("REFUND", "REFUNDED")
        assert payload["devolutionEndToEndId"].startswith("D")


LINK_VARIANTS = "PAID, EXPIRED, CANCELLED, REFUNDED, PARTIALLY_REFUNDED, REFUND_FAILED"
NO_VARIANTS = "only PAYMENT_LINK_INBOUND, PIX_QR_INBOUND, PIX_QR_PARTNER_INBOUND have variants"


@pytest.mark.parametrize(
    ("event_type", "variant", "line"),
    [
        ("PIX_OUTBOUND", "PAID", f"variant is not taken by PIX_OUTBOUND: {NO_VARIANTS}"),
        ("CARD_CHARGEBACK", "", f"variant is not taken by CARD_CHARGEBACK: {NO_VARIANTS}"),
        (
            "PAYMENT_LINK_INBOUND",
            "REFUND",
            f"variant must be one of: {LINK_VARIANTS} (for PAYMENT_LINK_INBOUND)",
        ),
        (
            "PIX_QR_INBOUND",
            "refund",
            "variant must be one of: PAYMENT, REFUND (for PIX_QR_INBOUND)",
        ),
        (
            "PIX_QR_PARTNER_INBOUND",
            2,
            "variant must be one of: PAYMENT, REFUND (for PIX_QR_PARTNER_INBOUND)",
        ),
    ],
)
async def test_a_test_event_takes_only_a_variant_of_its_type(
    merchant: Merchant, event_type: str, variant: object, line: str
) -> None:
    response = await merchant.post(
        "/webhook/v1/test-events", json={"eventType": event_type, "variant": variant}
    )
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == [line]


async def test_test_events_are_refused_in_production(production_service: RunningService) -> None:
    merchant = await production_service.merchant()
    response = await merchant.post("/webhook/v1/test-events", json={"eventType": "PIX_OUTBOUND"})
    assert_error_body(response, 403, ErrorCode.SANDBOX_ONLY)


# --- results (A6) -----------------------------------------------------------------------------


async def test_results_filter_and_page_newest_first(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    pix = await register(merchant, receiver, "/pix")
    receiver.behaviours["/card"] = always(500)
    card = await register(merchant, receiver, "/card", event_type="CARD_CHARGEBACK")
    for _ in range(3):
        await publish(publisher, merchant.customer_id)
    chargeback = json.loads(json_codec.dumps(sample_payload(EventType.CARD_CHARGEBACK)))
    await publish(publisher, merchant.customer_id, chargeback, event_type="CARD_CHARGEBACK")
    await results_for(merchant, 3, webhookId=pix["webhookId"])
    await results_for(merchant, 3, webhookId=card["webhookId"])

    everything = await results(merchant, size=100)
    times = [(r["attemptedAt"], r["resultId"]) for r in everything["content"]]
    assert times == sorted(times, reverse=True)
    assert everything["totalElements"] == 6

    only_card = await results(merchant, eventType="CARD_CHARGEBACK")
    assert {r["webhookId"] for r in only_card["content"]} == {card["webhookId"]}
    assert only_card["totalElements"] == 3
    successes = await results(merchant, status="SUCCESS")
    assert successes["totalElements"] == 3
    assert {r["webhookId"] for r in successes["content"]} == {pix["webhookId"]}
    exhausted = await results(merchant, status="EXHAUSTED", webhookId=card["webhookId"])
    assert exhausted["totalElements"] == 1

    page = await results(merchant, size=4, page=1)
    assert page | {"content": None} == {
        "content": None,
        "totalElements": 6,
        "totalPages": 2,
        "size": 4,
        "number": 1,
        "first": False,
        "last": True,
        "empty": False,
    }
    assert [r["resultId"] for r in page["content"]] == [
        r["resultId"] for r in everything["content"][4:]
    ]

    newest = everything["content"][0]["attemptedAt"]
    oldest = everything["content"][-1]["attemptedAt"]
    window = await results(merchant, startDate=newest, endDate=newest)
    assert window["totalElements"] >= 1
    assert all(r["attemptedAt"] == newest for r in window["content"])
    assert (await results(merchant, endDate=oldest))["totalElements"] >= 1
    assert (await results(merchant, startDate="2999-01-01"))["totalElements"] == 0
    assert (await results(merchant, endDate="2000-01-01T00:00:00Z"))["empty"] is True


async def test_results_of_another_customer_are_invisible(
    delivery_service: RunningService, publisher: Merchant, receiver: Receiver
) -> None:
    owner = await delivery_service.merchant()
    stranger = await delivery_service.merchant()
    webhook = await register(owner, receiver, "/mine")
    await publish(publisher, owner.customer_id)
    await results_for(owner, 1)
    assert (await results(stranger))["totalElements"] == 0
    assert (await results(stranger, webhookId=webhook["webhookId"]))["totalElements"] == 0


async def test_empty_results_are_the_empty_page(merchant: Merchant) -> None:
    assert await results(merchant) == EMPTY_PAGE


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"eventType": "NOPE"}, "eventType must be one of"),
        ({"status": "DONE"}, "status must be one of"),
        ({"webhookId": "x"}, "webhookId must be an integer"),
        ({"webhookId": 0}, "webhookId must be greater than or equal to 1"),
        ({"startDate": "yesterday"}, "startDate must be an ISO 8601 timestamp"),
        ({"endDate": "2026-13-01"}, "endDate must be an ISO 8601 timestamp"),
        (
            {"endDate": "2026-01-01T00:00:00+00:00:00.5"},
            "endDate must have an offset in hours and minutes",
        ),
        (
            {"startDate": "2026-02-01", "endDate": "2026-01-01"},
            "startDate must not be after endDate",
        ),
        ({"size": 500}, "size must be less than or equal to 100"),
        # Instants UTC cannot hold once their offset is applied.
        ({"startDate": "0001-01-01T00:00:00+01:00"}, "startDate is out of range"),
        ({"endDate": "9999-12-31T23:59:59-01:00"}, "endDate is out of range"),
        ({"webhookId": "1_0"}, "webhookId must be an integer"),
    ],
)
async def test_results_refuse_bad_filters(
    merchant: Merchant, params: dict[str, Any], message: str
) -> None:
    error = assert_error_body(await merchant.get("/webhook/v1/list/results", params=params), 400)
    assert any(line.startswith(message) for line in error["errors"]), error


async def test_results_in_a_range_inside_one_millisecond_are_none_not_an_error(
    merchant: Merchant,
) -> None:
    inside = {"startDate": "2026-01-01T10:00:00.0005Z", "endDate": "2026-01-01T10:00:00.0009Z"}
    response = await merchant.get("/webhook/v1/list/results", params=inside)
    assert response.status_code == 200, response.text
    assert response.json()["totalElements"] == 0


@pytest.mark.parametrize(
    "params",
    [
        {"startDate": "9999-12-31T23:59:59.999Z"},
        {"startDate": "9999-12-31T23:00:00.001Z", "endDate": "9999-12-31T23:59:59.999Z"},
        {"startDate": "9999-12-31"},
        {"endDate": "9999-12-31"},
        {"startDate": "0001-01-01", "endDate": "9999-12-31T23:59:59.999Z"},
    ],
)
async def test_results_at_the_ends_of_the_calendar_are_a_page_not_an_error(
    merchant: Merchant, params: dict[str, str]
) -> None:
    response = await merchant.get("/webhook/v1/list/results", params=params)
    assert response.status_code == 200, response.text
    assert response.json()["totalElements"] == 0


# --- redelivery, deactivation ---------------------------------------------------------------


async def test_an_event_can_be_redelivered(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    webhook = await register(merchant, receiver, "/again")
    accepted = await publish(publisher, merchant.customer_id)
    await receiver.wait_for("/again", 1)
    response = await merchant.post(
        f"/webhook/v1/{webhook['webhookId']}/redeliver", json={"eventId": accepted["eventId"]}
    )
    assert response.status_code == 202, response.text
    first, second = await receiver.wait_for("/again", 2)
    assert first.body == second.body
    assert second.headers["webhook-id"] == accepted["eventId"]
    records = await results_for(merchant, 2, webhookId=webhook["webhookId"])
    assert [r["attempt"] for r in records] == [1, 1]


async def test_changes_racing_a_delete_are_done_before_it_or_refused_after(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    # An update or a redelivery at the same moment as the delete: done first (and then
    # cancelled with the webhook), or a 404 after; never a 500.
    accepted = await publish(publisher, merchant.customer_id)
    for round_ in range(12):
        webhook = await register(merchant, receiver, f"/race/{round_}")
        path = f"/webhook/v1/{webhook['webhookId']}"
        deleted, updated, redelivered = await asyncio.gather(
            merchant.request("DELETE", path),
            merchant.put(path, json={"targetUrl": f"{receiver.base_url}/race/moved"}),
            merchant.post(f"{path}/redeliver", json={"eventId": accepted["eventId"]}),
        )
        assert deleted.status_code == 204, deleted.text
        assert updated.status_code in (200, 404), updated.text
        assert redelivered.status_code in (202, 404), redelivered.text
        assert (await merchant.get(path)).status_code == 404


async def test_redelivery_refusals(
    delivery_service: RunningService, publisher: Merchant, receiver: Receiver
) -> None:
    owner = await delivery_service.merchant()
    stranger = await delivery_service.merchant()
    webhook = await register(owner, receiver, "/r1")
    other_type = await register(owner, receiver, "/r2", event_type="CARD_CHARGEBACK")
    accepted = await publish(publisher, owner.customer_id)
    event_id = accepted["eventId"]

    theirs = await stranger.post(
        f"/webhook/v1/{webhook['webhookId']}/redeliver", json={"eventId": event_id}
    )
    assert_error_body(theirs, 404, ErrorCode.WEBHOOK_NOT_FOUND)
    strangers_hook = await register(stranger, receiver, "/r3")
    not_their_event = await stranger.post(
        f"/webhook/v1/{strangers_hook['webhookId']}/redeliver", json={"eventId": event_id}
    )
    assert_error_body(not_their_event, 404, ErrorCode.EVENT_NOT_FOUND)
    mismatch = await owner.post(
        f"/webhook/v1/{other_type['webhookId']}/redeliver", json={"eventId": event_id}
    )
    assert_error_body(mismatch, 409, ErrorCode.WEBHOOK_EVENT_MISMATCH)
    await owner.put(f"/webhook/v1/{webhook['webhookId']}", json={"isActive": False})
    inactive = await owner.post(
        f"/webhook/v1/{webhook['webhookId']}/redeliver", json={"eventId": event_id}
    )
    assert_error_body(inactive, 409, ErrorCode.WEBHOOK_INACTIVE)
    missing = await owner.post(f"/webhook/v1/{webhook['webhookId']}/redeliver", json={})
    assert_error_body(missing, 400)


# --- recovery -------------------------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_recovery_delivers_again_what_failed_for_good_and_nothing_else(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    """Three events exhausted their schedule, one was delivered, one is still being retried:
    recovering the range sends the three again, once each, as they were first sent."""
    before = datetime.now(UTC)
    refused = {"fail-1", "fail-2", "fail-3"}  # answered 500 until the receiver is fixed

    async def behave(request: Received, _nth: int) -> web.StreamResponse:
        transfer = json.loads(request.body)["transferId"]
        if transfer == "busy":  # slow, then busy: retried for a few seconds
            await asyncio.sleep(0.5)
            return await receivers.answer(503, **{"Retry-After": "1"})
        return await receivers.answer(500 if transfer in refused else 200)

    receiver.behaviours["/recover"] = behave
    webhook = await register(merchant, receiver, "/recover")
    hook = webhook["webhookId"]
    path = f"/webhook/v1/{hook}/recover"
    transfers = {}

    async def send(*names: str) -> None:
        for transfer in names:
            published = await publish(
                publisher, merchant.customer_id, pix_outbound(transferId=transfer)
            )
            transfers[published["eventId"]] = transfer

    await send("fail-1", "fail-2", "fail-3")
    await results_for(merchant, 3, webhookId=hook, status="EXHAUSTED")
    # Then a success, which keeps the webhook clear of automatic deactivation for a while.
    await send("ok", "busy")
    by_transfer = {transfer: event_id for event_id, transfer in transfers.items()}
    failed = {by_transfer[t] for t in ("fail-1", "fail-2", "fail-3")}
    await results_for(merchant, 1, webhookId=hook, status="SUCCESS")
    # Two retries of each failed event, and the busy one's first attempt.
    await results_for(merchant, 3 * 2 + 1, webhookId=hook, status="PENDING_RETRY")
    refused.clear()

    preview = await merchant.post(path, params={"dryRun": "true"}, json={"since": iso(before)})
    assert (preview.status_code, preview.json()) == (200, {"count": 3})
    recovered = await merchant.post(path, json={"since": iso(before)})
    assert (recovered.status_code, recovered.json()) == (202, {"count": 3})
    # At once again: the three are queued (or delivered by now), the busy one still retried.
    again = await merchant.post(path, json={"since": iso(before), "until": iso(datetime.now(UTC))})
    assert (again.status_code, again.json()) == (202, {"count": 0})

    def sent() -> Counter[str]:
        return Counter(r.headers["webhook-id"] for r in receiver.at("/recover"))

    async def sent_again() -> bool:
        return all(sent()[event_id] == 4 for event_id in failed)

    await eventually(sent_again, what="the three failed events sent again")

    async def busy_ended() -> bool:
        records = (await results(merchant, webhookId=hook, size=100))["content"]
        newest = next(r for r in records if r["eventId"] == by_transfer["busy"])
        return newest["status"] != "PENDING_RETRY"

    # The busy event's own schedule runs out (or the webhook, failing for a while, is switched
    # off first, which ends it as FAILED): it is then what a recovery finds, alone.
    await eventually(busy_ended, timeout=20, what="the busy event's schedule to end")
    busy_records = await results(merchant, webhookId=hook, size=100)
    reached = [
        r
        for r in busy_records["content"]
        if r["eventId"] == by_transfer["busy"] and r["httpStatus"] == 503
    ]
    assert sent() == {
        **{event_id: 4 for event_id in failed},
        by_transfer["ok"]: 1,
        by_transfer["busy"]: len(reached),
    }
    for request in receiver.at("/recover"):
        # Signed as the first time, under the event's id.
        body = verify(webhook["secret"], request)
        assert body["transferId"] == transfers[request.headers["webhook-id"]]
    records = await results(merchant, webhookId=hook, status="SUCCESS", size=100)
    assert sorted(r["attempt"] for r in records["content"]) == [1, 1, 1, 1]
    await merchant.put(f"/webhook/v1/{hook}", json={"isActive": True})
    last = await merchant.post(path, params={"dryRun": "true"}, json={"since": iso(before)})
    assert (last.status_code, last.json()) == (200, {"count": 1})
    # A range that ended before any of it finds nothing.
    earlier = {"since": iso(before - timedelta(days=1)), "until": iso(before)}
    nothing = await merchant.post(path, json=earlier)
    assert (nothing.status_code, nothing.json()) == (202, {"count": 0})


async def test_recovery_refusals(delivery_service: RunningService, receiver: Receiver) -> None:
    owner = await delivery_service.merchant()
    stranger = await delivery_service.merchant()
    webhook = await register(owner, receiver, "/recover-refused")
    path = f"/webhook/v1/{webhook['webhookId']}/recover"
    now = datetime.now(UTC)
    since = {"since": iso(now - timedelta(hours=1))}

    for dry_run in ({}, {"dryRun": "true"}):
        theirs = await stranger.post(path, params=dry_run, json=since)
        assert_error_body(theirs, 404, ErrorCode.WEBHOOK_NOT_FOUND)
    reader = await delivery_service.merchant(
        scopes=[Scope.WEBHOOK_READ], customer_id=owner.customer_id
    )
    assert_error_body(await reader.post(path, json=since), 403, ErrorCode.INSUFFICIENT_SCOPE)

    bad_ranges: list[tuple[dict[str, Any], str]] = [
        ({}, "since is required"),
        ({"until": iso(now)}, "since is required"),
        ({"since": "yesterday"}, "since must be an ISO 8601 timestamp"),
        ({"since": 1767225600}, "since must be an ISO 8601 timestamp"),
        ({"since": iso(now), "until": 1767225600}, "until must be an ISO 8601 timestamp"),
        (
            {"since": iso(now), "until": iso(now - timedelta(seconds=1))},
            "since must not be after until",
        ),
        ({"since": iso(now + timedelta(hours=1))}, "since must not be after until (now)"),
        ({"since": "2026-01-16", "until": "2026-01-15"}, "since must not be after until"),
        (
            {"since": iso(now - timedelta(days=14, minutes=6)), "until": iso(now)},
            "since must be at most 14 days before until",
        ),
        ({"since": iso(now - timedelta(days=15))}, "since must be at most 14 days before until"),
    ]
    for body, error in bad_ranges:
        refused = await owner.post(path, json=body)
        assert_error_body(refused, 400, ErrorCode.INVALID_PARAMETERS)
        assert any(line.startswith(error) for line in refused.json()["errors"]), (
            body,
            refused.text,
        )
    # 14 days, with Svix's five minutes of slack for clocks; bare dates are whole days.
    for body in (
        {"since": iso(now - timedelta(days=14, minutes=4)), "until": iso(now)},
        {"since": "2026-01-01", "until": "2026-01-14"},
        {"since": "2026-01-15", "until": "2026-01-15"},
    ):
        fine = await owner.post(path, json=body)
        assert (fine.status_code, fine.json()) == (202, {"count": 0}), (body, fine.text)

    await owner.put(f"/webhook/v1/{webhook['webhookId']}", json={"isActive": False})
    for dry_run in ({}, {"dryRun": "true"}):
        inactive = await owner.post(path, params=dry_run, json=since)
        assert_error_body(inactive, 409, ErrorCode.WEBHOOK_INACTIVE)


async def test_a_webhook_deactivated_while_retrying_gets_no_more_attempts(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/stop"] = always(500)
    webhook = await register(merchant, receiver, "/stop")
    await publish(publisher, merchant.customer_id)
    await receiver.wait_for("/stop", 1)
    await merchant.put(f"/webhook/v1/{webhook['webhookId']}", json={"isActive": False})
    records = await results_for(merchant, 2, webhookId=webhook["webhookId"])
    assert records[0]["status"] == "FAILED"
    assert "inactive" in records[0]["errorMessage"]
    await asyncio.sleep(1)
    assert len(receiver.at("/stop")) == 1


async def test_a_webhook_that_changed_its_event_type_gets_no_more_retries_of_the_old_one(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    # (Found by the fuzz audit: the retry went to the webhook under its new event type.)
    receiver.behaviours["/moved"] = always(500)
    webhook = await register(merchant, receiver, "/moved")
    await publish(publisher, merchant.customer_id)  # a PIX_OUTBOUND event
    await receiver.wait_for("/moved", 1)
    changed = await merchant.put(
        f"/webhook/v1/{webhook['webhookId']}", json={"eventType": "CARD_CHARGEBACK"}
    )
    assert changed.status_code == 200, changed.text
    records = await results_for(merchant, 2, webhookId=webhook["webhookId"])
    assert records[0]["status"] == "FAILED" and records[0]["eventType"] == "PIX_OUTBOUND"
    assert records[0]["errorMessage"] == (
        "not sent: the webhook now receives CARD_CHARGEBACK, not PIX_OUTBOUND; "
        "this delivery is cancelled"
    )
    await asyncio.sleep(1)
    assert len(receiver.at("/moved")) == 1


async def test_deleting_a_webhook_ends_its_pending_retries_in_the_history(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    # 503 with Retry-After: the retry waits two seconds, time to delete the webhook.
    receiver.behaviours["/gone"] = always(503, **{"Retry-After": "2"})
    webhook = await register(merchant, receiver, "/gone")
    accepted = await publish(publisher, merchant.customer_id)
    await receiver.wait_for("/gone", 1)
    await results_for(merchant, 1, webhookId=webhook["webhookId"])
    response = await merchant.delete(f"/webhook/v1/{webhook['webhookId']}")
    assert response.status_code == 204

    records = (await results(merchant, webhookId=webhook["webhookId"]))["content"]
    assert [r["status"] for r in records] == ["FAILED", "PENDING_RETRY"]
    assert records[0]["attempt"] == 2 and records[0]["eventId"] == accepted["eventId"]
    assert records[0]["errorMessage"] == (
        "not sent: the webhook was deleted; this delivery is cancelled"
    )
    assert records[0]["httpStatus"] is None and records[0]["nextAttemptAt"] is None
    await asyncio.sleep(2.5)
    assert len(receiver.at("/gone")) == 1


@pytest.mark.parametrize("how", ["delete", "deactivate"])
async def test_nothing_more_is_sent_once_a_webhook_is_deleted_or_deactivated(
    delivery_service: RunningService, publisher: Merchant, how: str
) -> None:
    merchant = await delivery_service.merchant()
    slow = Receiver(behaviours={"/slow": hanging(30)})
    await slow.start()
    try:
        webhook = await register(merchant, slow, "/slow")
        events = [await publish(publisher, merchant.customer_id) for _ in range(40)]
        cap = delivery_service.settings.delivery_concurrency_per_target
        await slow.wait_for("/slow", cap)  # the worker holds the other 24, claimed
        path = f"/webhook/v1/{webhook['webhookId']}"
        if how == "delete":
            assert (await merchant.delete(path)).status_code == 204
        else:
            assert (await merchant.put(path, json={"isActive": False})).status_code == 200
        # The attempts in flight time out (1.5 s); nothing after them may be sent. Deleted, each
        # delivery ends in one record; deactivated, those in flight are retried once more, to
        # be refused as inactive.
        expected = 40 if how == "delete" else 40 + cap
        records = await results_for(merchant, expected, timeout=15, webhookId=webhook["webhookId"])
        assert len(records) == expected
        await asyncio.sleep(1)
        assert len(slow.received) == cap
        latest: dict[str, dict[str, Any]] = {}
        for record in reversed(records):  # oldest first: the last one seen is the newest
            latest[record["eventId"]] = record
        assert set(latest) == {e["eventId"] for e in events}
        assert {r["status"] for r in latest.values()} == {"FAILED"}, latest
        assert all(r["nextAttemptAt"] is None for r in latest.values())
    finally:
        await slow.stop()


async def test_publishing_while_webhooks_are_deleted_never_fails(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    stop = asyncio.Event()
    answers: list[int] = []

    async def keep_publishing() -> None:
        while not stop.is_set():
            response = await publisher.post(
                "/internal/v1/events",
                content=json_codec.dumps(
                    {
                        "eventType": "PIX_OUTBOUND",
                        "customerId": merchant.customer_id,
                        "payload": pix_outbound(),
                    }
                ),
                headers={"content-type": "application/json"},
            )
            answers.append(response.status_code)

    publishers = [asyncio.create_task(keep_publishing()) for _ in range(4)]
    try:
        for _ in range(12):
            webhook = await register(merchant, receiver, "/churn")
            await asyncio.sleep(0.05)
            response = await merchant.delete(f"/webhook/v1/{webhook['webhookId']}")
            assert response.status_code == 204, response.text
    finally:
        stop.set()
        await asyncio.gather(*publishers)
    assert answers and set(answers) == {202}


async def test_a_webhook_failing_for_the_whole_period_is_deactivated_visibly(
    delivery_service: RunningService, merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/dead"] = always(500)
    webhook = await register(merchant, receiver, "/dead")
    webhook_id = webhook["webhookId"]

    async def keep_failing() -> None:
        while True:
            await publish(publisher, merchant.customer_id)
            await asyncio.sleep(0.5)

    feeding = asyncio.create_task(keep_failing())
    try:

        async def deactivated() -> bool:
            return (await merchant.get(f"/webhook/v1/{webhook_id}")).json()["isActive"] is False

        await eventually(deactivated, timeout=15, what="automatic deactivation")
    finally:
        feeding.cancel()
    status = (await merchant.get(f"/webhook/v1/{webhook_id}/delivery-status")).json()
    assert status["isActive"] is False
    assert status["deactivatedAt"] is not None
    assert "every delivery failed for 4 seconds" in status["deactivationReason"]
    assert status["failingSince"] <= status["deactivatedAt"]

    # Switched back on by its owner: a fresh start.
    await merchant.put(f"/webhook/v1/{webhook_id}", json={"isActive": True})
    status = (await merchant.get(f"/webhook/v1/{webhook_id}/delivery-status")).json()
    assert status == status | {"isActive": True, "deactivatedAt": None, "deactivationReason": None}


async def test_a_healthy_webhook_is_never_deactivated(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    receiver.behaviours["/ok-later"] = failing_then_ok(1)
    webhook = await register(merchant, receiver, "/ok-later")
    await publish(publisher, merchant.customer_id)
    await receiver.wait_for("/ok-later", 2)
    await asyncio.sleep(0.3)
    status = (await merchant.get(f"/webhook/v1/{webhook['webhookId']}/delivery-status")).json()
    assert status["failingSince"] is None
    assert status["lastSuccessAt"] is not None
    assert status["isActive"] is True
