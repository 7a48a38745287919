"""Paying links: the one payment service, card splits, refusals, and the sandbox auto-payment
reaching a real receiver as a signed PAYMENT_LINK_INBOUND."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.deliveries import eventually
from tests.support.payment_links import BASE, create, listing, pay, tx, window
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService, assert_error_body, start_service
from tests.support.settings import make_settings
from tucano.brazil.pix import is_valid_end_to_end_id
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.deliveries.models import Event
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.schemas import METHOD_CARD, METHOD_PIX


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


async def details(merchant: Merchant, link_uuid: str) -> dict[str, object]:
    response = await merchant.get(f"{BASE}/{link_uuid}", headers=tx())
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_card_payment_splits_exactly_and_publishes_its_event(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, amount=Decimal("100.00"), numbersInstallments=3)
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
    paid = await details(merchant, link["linkPaymentUuid"])
    assert paid["status"] == {"code": 2, "description": "PAID"}
    payment = paid["payment"]
    assert isinstance(payment, dict)
    assert payment["paymentMethod"] == 1 and payment["installments"] == 3
    assert payment["amount"] == 100.0
    assert payment["paymentReceipt"].isdigit()
    async with service.database.session() as session:
        stored = await session.scalar(
            select(Payment)
            .join(PaymentLink)
            .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
        assert stored is not None and stored.installment_cents == "3334,3333,3333"
        event = await session.scalar(
            select(Event)
            .where(Event.customer_id == merchant.customer_id)
            .order_by(Event.created_at.desc())
        )
    assert event is not None and event.event_type == "PAYMENT_LINK_INBOUND"
    body = json.loads(event.payload)
    assert body == body | {
        "paymentLinkUuid": link["linkPaymentUuid"],
        "paymentMethod": "CREDIT_CARD",
        "paymentId": payment["paymentId"],
        "paymentReceipt": payment["paymentReceipt"],
        "amount": 100.0,
        "userReference": "order-42",
        "numbersInstallments": 3,
        "status": "PAID",
    }
    assert '"amount":100.00' in event.payload


async def test_a_paid_link_is_refused_and_never_expires(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, expirationDays=1)
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    with pytest.raises(AppError) as refused:
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD)
    assert refused.value.code is ErrorCode.PAYMENT_LINK_NOT_PAYABLE
    assert "PAID" in refused.value.errors[0]
    with clock.freeze(clock.now() + timedelta(days=30)):
        fresh = await service.merchant(customer_id=merchant.customer_id)
        assert (await details(fresh, link["linkPaymentUuid"]))["status"] == {
            "code": 2,
            "description": "PAID",
        }


async def test_an_expired_link_cannot_be_paid(service: RunningService, merchant: Merchant) -> None:
    with clock.freeze(clock.now() - timedelta(days=2)):
        link = await create(merchant, expirationDays=1)
    with pytest.raises(AppError) as refused:
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    assert "EXPIRED" in refused.value.errors[0]


async def test_card_installments_are_bounded_by_the_offer(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, numbersInstallments=2)
    with pytest.raises(AppError, match="Invalid request"):
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
    assert (await details(merchant, link["linkPaymentUuid"]))["payment"] is None


async def test_no_card_instalment_is_charged_below_a_cent(
    service: RunningService, merchant: Merchant
) -> None:
    # 0.02 offered in up to 10: from 5 on the options read 0.00 (decisions.md's rounding to the
    # letter), and a charge in three would be 0.01 + 0.01 + nothing.
    link = await create(merchant, amount=Decimal("0.02"), numbersInstallments=10)
    assert link["installmentsOptions"][4] == {"numberInstallments": 5, "amountInstallment": 0.0}
    with pytest.raises(AppError) as refused:
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
    assert refused.value.errors == ["installments must be between 1 and 2 for this link"]
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=2)
    payment = (await details(merchant, link["linkPaymentUuid"]))["payment"]
    assert isinstance(payment, dict) and payment["installments"] == 2


async def test_payments_are_found_by_method_and_receipt_and_reported(
    service: RunningService, merchant: Merchant
) -> None:
    pix = await create(merchant, amount=Decimal("10.00"))
    card = await create(merchant, amount=Decimal("20.00"))
    await create(merchant, amount=Decimal("40.00"))
    await pay(service, merchant, pix["linkPaymentUuid"], METHOD_PIX)
    await pay(service, merchant, card["linkPaymentUuid"], METHOD_CARD, installments=2)
    receipt = (await details(merchant, pix["linkPaymentUuid"]))["payment"]["paymentReceipt"]  # type: ignore[index]
    assert is_valid_end_to_end_id(receipt)
    by_receipt = await listing(merchant, paymentReceipt=receipt)
    assert [link["linkPaymentUuid"] for link in by_receipt["content"]] == [pix["linkPaymentUuid"]]
    assert (await listing(merchant, paymentMethod=1))["totalElements"] == 1
    assert (await listing(merchant, status="PAID"))["totalElements"] == 2
    report = (await merchant.get(f"{BASE}/report", params=window(), headers=tx())).json()
    assert report["byPaymentMethod"] == [
        {"paymentMethod": 1, "count": 1, "amount": 20.0},
        {"paymentMethod": 2, "count": 1, "amount": 10.0},
    ]
    statuses = {s["status"]: s["count"] for s in report["byStatus"]}
    assert statuses == {"CREATED": 1, "PAID": 2, "EXPIRED": 0}


# --- sandbox auto-payment ------------------------------------------------------------------


async def test_a_link_of_1_01_is_paid_by_pix_on_its_own_and_its_event_delivered(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    hook = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": receiver.url("/paid"), "eventType": "PAYMENT_LINK_INBOUND"},
    )
    secret = hook.json()["secret"]
    link = await create(merchant, amount=Decimal("1.01"))
    not_auto = await create(merchant, amount=Decimal("1.02"))

    (request,) = await receiver.wait_for("/paid", 1, timeout=15)
    event = StandardWebhook(secret).verify(request.body, request.headers)
    assert event["paymentLinkUuid"] == link["linkPaymentUuid"]
    assert event["paymentMethod"] == "PIX" and event["status"] == "PAID"
    assert event["amount"] == 1.01 and b'"amount":1.01' in request.body
    assert is_valid_end_to_end_id(event["paymentReceipt"])
    assert event["numbersInstallments"] is None
    assert event["paymentDate"].endswith("Z")

    paid = await details(merchant, link["linkPaymentUuid"])
    assert paid["status"] == {"code": 2, "description": "PAID"}
    assert paid["payment"] == {
        "paymentMethod": 2,
        "paymentId": event["paymentId"],
        "paymentReceipt": event["paymentReceipt"],
        "paymentDate": event["paymentDate"],
        "installments": 1,
        "amount": 1.01,
    }
    assert (await details(merchant, not_auto["linkPaymentUuid"]))["status"][
        "description"
    ] == "CREATED"  # type: ignore[index]


async def test_an_auto_payment_survives_a_stop(
    database_url: str, delivery_service: RunningService
) -> None:
    # A link created by a process that stops before its payment is due...
    short_lived = await start_service(
        make_settings(database_url, sandbox_autopay_delay_seconds=0.3), delivery_service.database
    )
    merchant = await short_lived.merchant()
    link = await create(merchant, amount=Decimal("0.01"))
    await short_lived.stop()
    # ...is paid by whichever process runs the jobs next (here, the delivery service's).
    reader = await delivery_service.merchant(customer_id=merchant.customer_id)

    async def paid() -> bool:
        body = await details(reader, link["linkPaymentUuid"])
        return body["status"] == {"code": 2, "description": "PAID"}

    await eventually(paid, timeout=10, what="the auto-payment")


async def test_production_never_pays_on_its_own(production_service: RunningService) -> None:
    merchant = await production_service.merchant()
    link = await create(merchant, amount=Decimal("2.01"))
    async with production_service.database.session() as session:
        stored = await session.scalar(
            select(PaymentLink).where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
    assert stored is not None and stored.autopay_at is None
    unknown = await merchant.get(f"{BASE}/{uuid.uuid4()}", headers=tx())
    assert_error_body(unknown, 404)
