"""Refunds and cancellation through the API, as a merchant meets them: the answers, the rules
(never more than was paid, even at once), idempotency by x-transaction-id, and the sandbox."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.support.payment_links import BASE, create, pay, tx
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.core.clock import clock
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX
from tucano.refunds.service import run_due_refunds


async def details(merchant: Merchant, link_uuid: str) -> dict[str, Any]:
    response = await merchant.get(f"{BASE}/{link_uuid}", headers=tx())
    assert response.status_code == 200, response.text
    return dict(response.json())


async def refund(merchant: Merchant, link_uuid: str, key: str | None = None, **body: Any) -> Any:
    headers = {"x-transaction-id": key or str(uuid.uuid4())}
    return await merchant.post(f"{BASE}/{link_uuid}/refunds", json=body, headers=headers)


async def paid_link(
    service: RunningService, merchant: Merchant, amount: str, method: int = METHOD_CARD
) -> str:
    link = await create(merchant, amount=Decimal(amount), numbersInstallments=3)
    await pay(service, merchant, link["linkPaymentUuid"], method)
    return str(link["linkPaymentUuid"])


async def test_a_card_payment_refunded_in_full_makes_the_link_refunded(
    service: RunningService, merchant: Merchant
) -> None:
    link = await paid_link(service, merchant, "150.00")
    answer = await refund(merchant, link, reason="Cliente desistiu")
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert set(body) == {
        "refundId", "amount", "reason", "status", "failureReason", "createdAt", "completedAt"
    }  # fmt: skip
    assert body["amount"] == 150.0 and b'"amount":150.00' in answer.content
    assert body["status"] == "SUCCEEDED" and body["failureReason"] is None
    assert body["reason"] == "Cliente desistiu"
    assert body["createdAt"].endswith("Z") and body["completedAt"].endswith("Z")
    shown = await details(merchant, link)
    assert shown["status"] == {"code": 5, "description": "REFUNDED"}
    assert shown["refundedAmount"] == 150.0
    assert shown["refunds"] == [body]
    listed = await merchant.get(f"{BASE}/{link}/refunds", headers=tx())
    assert listed.status_code == 200 and listed.json() == [body]
    again = await refund(merchant, link)
    assert_error_body(again, 409)
    assert again.json()["errorCode"] == 57


async def test_a_payment_refunded_in_two_parts_stays_paid_until_the_last(
    service: RunningService, merchant: Merchant
) -> None:
    link = await paid_link(service, merchant, "100.00")
    first = await refund(merchant, link, amount=30.5)
    assert first.status_code == 201 and first.json()["amount"] == 30.5
    assert (await details(merchant, link))["status"]["description"] == "PAID"
    too_much = await refund(merchant, link, amount=69.51)
    assert_error_body(too_much, 400)
    assert "69.50" in too_much.text
    rest = await refund(merchant, link)  # no amount: what is left
    assert rest.status_code == 201 and rest.json()["amount"] == 69.5
    shown = await details(merchant, link)
    assert shown["status"]["description"] == "REFUNDED"
    assert shown["refundedAmount"] == 100.0
    assert [r["amount"] for r in shown["refunds"]] == [30.5, 69.5]


async def test_the_same_transaction_id_refunds_once(
    service: RunningService, merchant: Merchant
) -> None:
    link = await paid_link(service, merchant, "50.00")
    key = str(uuid.uuid4())
    first = await refund(merchant, link, key, amount=10)
    replay = await refund(merchant, link, key, amount=10.00)
    assert first.status_code == replay.status_code == 201
    assert replay.content == first.content
    other_body = await refund(merchant, link, key, amount=11)
    assert_error_body(other_body, 409)
    assert other_body.json()["errorCode"] == 58
    shown = await details(merchant, link)
    assert shown["refundedAmount"] == 10.0 and len(shown["refunds"]) == 1


@pytest.mark.parametrize("amount", ["10.00", "0.05"])
async def test_concurrent_refunds_never_give_back_more_than_was_paid(
    service: RunningService, merchant: Merchant, amount: str
) -> None:
    link = await paid_link(service, merchant, amount)
    cents = int(Decimal(amount) * 100)
    part = Decimal(max(1, cents // 3)) / 100
    answers = await asyncio.gather(*(refund(merchant, link, amount=float(part)) for _ in range(8)))
    codes = sorted(a.status_code for a in answers)
    succeeded = [a.json() for a in answers if a.status_code == 201]
    assert all(code in (201, 400, 409) for code in codes), codes
    given_back = sum(Decimal(str(r["amount"])) for r in succeeded)
    assert given_back <= Decimal(amount)
    assert len(succeeded) == cents // int(part * 100)
    shown = await details(merchant, link)
    assert Decimal(str(shown["refundedAmount"])) == given_back


async def test_a_refund_ending_in_13_cents_fails_in_the_sandbox(
    service: RunningService, merchant: Merchant
) -> None:
    link = await paid_link(service, merchant, "20.00")
    labels = {"method": "card", "outcome": "failed"}
    before = REGISTRY.get_sample_value("tucano_refund_answers_total", labels) or 0
    failed = await refund(merchant, link, amount=5.13)
    assert failed.status_code == 201
    assert REGISTRY.get_sample_value("tucano_refund_answers_total", labels) == before + 1
    assert failed.json()["status"] == "FAILED"
    assert "13 cents" in failed.json()["failureReason"]
    shown = await details(merchant, link)
    assert shown["status"]["description"] == "PAID" and shown["refundedAmount"] == 0.0
    # A failed refund takes nothing of what is left.
    whole = await refund(merchant, link)
    assert whole.json()["amount"] == 20.0 and whole.json()["status"] == "SUCCEEDED"


async def test_only_a_paid_link_of_ones_own_is_refunded(
    service: RunningService, merchant: Merchant
) -> None:
    open_link = await create(merchant)
    unpaid = await refund(merchant, open_link["linkPaymentUuid"])
    assert_error_body(unpaid, 409)
    assert "CREATED" in unpaid.text
    stranger = await service.merchant()
    link = await paid_link(service, merchant, "10.00")
    assert_error_body(await refund(stranger, link), 404)
    assert_error_body(await refund(merchant, str(uuid.uuid4())), 404)
    for bad in ({"amount": 0}, {"amount": 1.001}, {"amount": "x"}, {"reason": "r" * 141}):
        assert_error_body(await refund(merchant, link, **bad), 400)
    missing_key = await merchant.post(f"{BASE}/{link}/refunds", json={})
    assert_error_body(missing_key, 400)
    reader = await service.merchant(
        customer_id=merchant.customer_id, scopes=[Scope.PAYMENT_LINK_READ]
    )
    assert_error_body(await refund(reader, link), 403)
    assert (await details(merchant, link))["refundedAmount"] == 0.0


async def test_a_pix_refund_is_pending_until_the_sandbox_settles_it(
    service: RunningService, merchant: Merchant
) -> None:
    link = await paid_link(service, merchant, "40.00", METHOD_PIX)
    first = await refund(merchant, link, amount=15)
    assert first.status_code == 201 and first.json()["status"] == "PENDING"
    assert first.json()["completedAt"] is None
    shown = await details(merchant, link)
    assert shown["refundedAmount"] == 0.0 and shown["refunds"][0]["status"] == "PENDING"
    # What is pending counts against what is left.
    assert_error_body(await refund(merchant, link, amount=25.01), 400)
    with clock.freeze(clock.now() + timedelta(seconds=6)):
        assert await run_due_refunds(service.database, service.app.state.refunder) == 1
    shown = await details(merchant, link)
    assert shown["refunds"][0]["status"] == "SUCCEEDED"
    assert shown["refundedAmount"] == 15.0 and shown["status"]["description"] == "PAID"


async def test_cancel_makes_a_created_link_cancelled_once(
    service: RunningService, merchant: Merchant
) -> None:
    link = (await create(merchant))["linkPaymentUuid"]
    answer = await merchant.post(f"{BASE}/{link}/cancel", headers=tx())
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == {"code": 4, "description": "CANCELLED"}
    assert (await details(merchant, link))["status"]["description"] == "CANCELLED"
    again = await merchant.post(f"{BASE}/{link}/cancel", headers=tx())
    assert_error_body(again, 409)
    assert again.json()["errorCode"] == 56 and "CANCELLED" in again.text
    paid = await paid_link(service, merchant, "10.00")
    assert_error_body(await merchant.post(f"{BASE}/{paid}/cancel", headers=tx()), 409)
    stranger = await service.merchant()
    assert_error_body(await stranger.post(f"{BASE}/{link}/cancel", headers=tx()), 404)
    assert_error_body(await merchant.post(f"{BASE}/{link}/cancel"), 400)


async def test_a_pix_payment_is_refunded_up_to_90_days_after_it(
    service: RunningService, merchant: Merchant
) -> None:
    with clock.freeze(clock.now() - timedelta(days=91)):
        link = await create(merchant, amount=Decimal("10.00"))
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    late = await refund(merchant, link["linkPaymentUuid"])
    assert_error_body(late, 409)
    assert "90 days" in late.text
    with clock.freeze(clock.now() - timedelta(days=89)):
        recent = await paid_link(service, merchant, "10.00", METHOD_PIX)
    assert (await refund(merchant, recent)).status_code == 201


async def test_the_events_pix_provider_and_a_missing_card_processor_refund_nothing(
    production_service: RunningService,
) -> None:
    merchant = await production_service.merchant()
    for method, words in ((METHOD_PIX, "cannot refund"), (METHOD_CARD, "card processor")):
        link = await paid_link(production_service, merchant, "10.00", method)
        answer = await refund(merchant, link)
        assert_error_body(answer, 409)
        assert words in answer.text
        assert (await details(merchant, link))["refunds"] == []


async def test_a_refund_body_may_be_left_out_or_name_the_amount_as_text(
    service: RunningService, merchant: Merchant
) -> None:
    link = await paid_link(service, merchant, "30.00")
    for body in (b"[]", b'"x"', b"{", b'{"amount": null, "extra": 1, "reason": 5}'):
        answer = await merchant.post(
            f"{BASE}/{link}/refunds",
            content=body,
            headers={"x-transaction-id": str(uuid.uuid4()), "content-type": "application/json"},
        )
        assert_error_body(answer, 400)
    key = {"x-transaction-id": str(uuid.uuid4())}
    as_text = await merchant.post(f"{BASE}/{link}/refunds", json={"amount": "10.00"}, headers=key)
    assert as_text.status_code == 201 and as_text.json()["amount"] == 10.0
    empty = await merchant.post(
        f"{BASE}/{link}/refunds", headers={"x-transaction-id": str(uuid.uuid4())}
    )
    assert empty.status_code == 201 and empty.json()["amount"] == 20.0
    as_form = await merchant.post(
        f"{BASE}/{link}/refunds",
        content=b"amount=1",
        headers={
            "x-transaction-id": str(uuid.uuid4()),
            "content-type": "application/x-www-form-urlencoded",
        },
    )
    assert_error_body(as_form, 415)
