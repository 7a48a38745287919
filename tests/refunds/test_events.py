"""Every change of a link's state reaches the merchant's receiver as a signed
PAYMENT_LINK_INBOUND (decisions.md: PAID, EXPIRED, CANCELLED, REFUNDED, PARTIALLY_REFUNDED, a
failed refund), and a Pix refund also as a PIX_QR_INBOUND of type REFUND."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.payment_links import BASE, create, pay, tx
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService
from tucano.brazil.pix import is_valid_end_to_end_id
from tucano.core.clock import clock
from tucano.deliveries.models import Event
from tucano.payment_links import lifecycle
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX


async def subscribed(
    service: RunningService, receiver: Receiver, event_type: str = "PAYMENT_LINK_INBOUND"
) -> tuple[Merchant, StandardWebhook]:
    merchant = await service.merchant()
    return merchant, await subscribe(merchant, receiver, event_type)


async def subscribe(merchant: Merchant, receiver: Receiver, event_type: str) -> StandardWebhook:
    hook = await merchant.post(
        "/webhook/v1/create",
        json={
            "targetUrl": receiver.url(f"/{merchant.customer_id}/{event_type}"),
            "eventType": event_type,
        },
    )
    assert hook.status_code == 200, hook.text
    return StandardWebhook(hook.json()["secret"])


async def received(
    receiver: Receiver,
    merchant: Merchant,
    signer: StandardWebhook,
    count: int,
    event_type: str = "PAYMENT_LINK_INBOUND",
) -> list[dict[str, Any]]:
    requests = await receiver.wait_for(f"/{merchant.customer_id}/{event_type}", count, timeout=20)
    return [signer.verify(request.body, request.headers) for request in requests]


async def refund(merchant: Merchant, link_uuid: str, **body: Any) -> dict[str, Any]:
    answer = await merchant.post(
        f"{BASE}/{link_uuid}/refunds", json=body, headers={"x-transaction-id": str(uuid.uuid4())}
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def test_cancelling_sends_cancelled(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant, signer = await subscribed(delivery_service, receiver)
    link = await create(merchant, amount=Decimal("12.34"), userReference="pedido-9")
    answer = await merchant.post(f"{BASE}/{link['linkPaymentUuid']}/cancel", headers=tx())
    assert answer.status_code == 200
    [event] = await received(receiver, merchant, signer, 1)
    assert event["status"] == "CANCELLED"
    assert event["paymentLinkUuid"] == link["linkPaymentUuid"]
    assert event["amount"] == 12.34 and event["userReference"] == "pedido-9"
    assert event["statusDate"].endswith("Z") and event.get("paymentId") is None


async def test_card_refunds_send_partially_refunded_then_refunded_and_a_failure(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant, signer = await subscribed(delivery_service, receiver)
    link = await create(merchant, amount=Decimal("100.00"), numbersInstallments=2)
    await pay(delivery_service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=2)
    failed = await refund(merchant, link["linkPaymentUuid"], amount=1.13)
    part = await refund(merchant, link["linkPaymentUuid"], amount=40)
    rest = await refund(merchant, link["linkPaymentUuid"])
    paid, *changes = await received(receiver, merchant, signer, 4)
    assert paid["status"] == "PAID"
    by_refund = {event["refund"]["refundId"]: event for event in changes}
    assert by_refund[failed["refundId"]]["status"] == "PAID"
    assert by_refund[failed["refundId"]]["refund"]["status"] == "FAILED"
    assert "13 cents" in by_refund[failed["refundId"]]["refund"]["failureReason"]
    partial = by_refund[part["refundId"]]
    assert partial["status"] == "PARTIALLY_REFUNDED"
    assert partial["refund"] == {
        "refundId": part["refundId"], "amount": 40.0, "status": "SUCCEEDED", "failureReason": None
    }  # fmt: skip
    assert partial["refundedAmount"] == 40.0
    assert partial["paymentMethod"] == "CREDIT_CARD" and partial["numbersInstallments"] == 2
    assert partial["paymentReceipt"] == paid["paymentReceipt"]
    whole = by_refund[rest["refundId"]]
    assert whole["status"] == "REFUNDED" and whole["refundedAmount"] == 100.0
    assert whole["refund"]["amount"] == 60.0


async def test_a_pix_refund_also_sends_a_pix_qr_inbound_refund(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant, links_signer = await subscribed(delivery_service, receiver)
    pix_signer = await subscribe(merchant, receiver, "PIX_QR_INBOUND")
    link = await create(merchant, amount=Decimal("30.00"))
    await pay(delivery_service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    asked = await refund(merchant, link["linkPaymentUuid"], amount=10)
    assert asked["status"] == "PENDING"
    # The sandbox settles Pix refunds 5 s after they are asked for (the job's next turn).
    [devolution] = await received(receiver, merchant, pix_signer, 1, "PIX_QR_INBOUND")
    assert devolution["type"] == "REFUND" and devolution["amount"] == 10.0
    assert devolution["devolutionEndToEndId"].startswith("D")
    paid, partial = await received(receiver, merchant, links_signer, 2)
    assert devolution["endToEndId"] == paid["paymentReceipt"]
    assert is_valid_end_to_end_id(devolution["endToEndId"])
    assert devolution["payer"]["documentNumber"] == link["registrationNumber"]
    assert partial["status"] == "PARTIALLY_REFUNDED"
    assert partial["refund"]["refundId"] == asked["refundId"]


async def test_a_link_that_expires_sends_expired_once(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant, signer = await subscribed(delivery_service, receiver)
    with clock.freeze(clock.now() - timedelta(days=1, seconds=-2)):
        link = await create(merchant, amount=Decimal("7.00"), expirationDays=1)
    # It expires two seconds from now; the job (every few seconds here) notices.
    [event] = await received(receiver, merchant, signer, 1)
    assert event["status"] == "EXPIRED"
    assert event["paymentLinkUuid"] == link["linkPaymentUuid"]
    assert event["statusDate"] == link["expirationDate"]
    # Once: a later run of the job finds nothing more of it.
    async with delivery_service.database.session() as session:
        await lifecycle.announce_expired_links(session)
        await session.commit()
    async with delivery_service.database.read_session() as session:
        published = await session.scalar(
            select(func.count()).where(Event.customer_id == merchant.customer_id)
        )
    assert published == 1


async def test_a_merchant_cancels_refunds_a_card_in_full_and_a_pix_in_two_parts(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    """The issue's whole story in the sandbox: each change reaches the receiver, signed."""
    merchant, signer = await subscribed(delivery_service, receiver)
    sent_by_mistake = await create(merchant, amount=Decimal("5.00"))
    by_card = await create(merchant, amount=Decimal("80.00"))
    by_pix = await create(merchant, amount=Decimal("50.00"))
    await pay(delivery_service, merchant, by_card["linkPaymentUuid"], METHOD_CARD)
    await pay(delivery_service, merchant, by_pix["linkPaymentUuid"], METHOD_PIX)
    cancelled = await merchant.post(
        f"{BASE}/{sent_by_mistake['linkPaymentUuid']}/cancel", headers=tx()
    )
    assert cancelled.status_code == 200
    assert (await refund(merchant, by_card["linkPaymentUuid"]))["status"] == "SUCCEEDED"
    first = await refund(merchant, by_pix["linkPaymentUuid"], amount=20)
    second = await refund(merchant, by_pix["linkPaymentUuid"])
    assert (first["status"], second["status"], second["amount"]) == ("PENDING", "PENDING", 30.0)
    events = await received(receiver, merchant, signer, 6)
    seen = sorted((event["paymentLinkUuid"], event["status"]) for event in events)
    assert seen == sorted(
        [
            (sent_by_mistake["linkPaymentUuid"], "CANCELLED"),
            (by_card["linkPaymentUuid"], "PAID"),
            (by_card["linkPaymentUuid"], "REFUNDED"),
            (by_pix["linkPaymentUuid"], "PAID"),
            (by_pix["linkPaymentUuid"], "PARTIALLY_REFUNDED"),
            (by_pix["linkPaymentUuid"], "REFUNDED"),
        ]
    )
    shown = await merchant.get(f"{BASE}/{by_pix['linkPaymentUuid']}", headers=tx())
    assert shown.json()["status"] == {"code": 5, "description": "REFUNDED"}
    assert [r["status"] for r in shown.json()["refunds"]] == ["SUCCEEDED", "SUCCEEDED"]
