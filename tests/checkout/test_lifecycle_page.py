"""The checkout of a link the merchant cancelled or refunded, over HTTP on each database: a
cancelled link says so, offers nothing and charges nothing; a refunded link's receipt says what
was given back and when (Brasília time), and never why a refund failed."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.support.payer import (
    APPROVED_VISA,
    Payer,
    card_form,
    checkout_path,
    form_action,
    hidden_token,
)
from tests.support.payment_links import BASE, create, pay, tx
from tests.support.service import Merchant, RunningService, assert_error_body, serving
from tests.support.settings import make_settings
from tucano.checkout.models import CardAttempt
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX
from tucano.payment_links.models import PaymentLink
from tucano.refunds.service import run_due_refunds

JSON = {"accept": "application/json"}


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


@pytest.fixture
async def payer_of(service: RunningService) -> AsyncIterator[Callable[[dict[str, Any]], Payer]]:
    payers: list[Payer] = []

    def make(link: dict[str, Any]) -> Payer:
        payers.append(Payer(service, link))
        return payers[-1]

    yield make
    for payer in payers:
        await payer.close()


async def cancel(merchant: Merchant, link: dict[str, Any]) -> None:
    answer = await merchant.post(f"{BASE}/{link['linkPaymentUuid']}/cancel", headers=tx())
    assert answer.status_code == 200, answer.text


async def refund(merchant: Merchant, link: dict[str, Any], **body: Any) -> dict[str, Any]:
    answer = await merchant.post(
        f"{BASE}/{link['linkPaymentUuid']}/refunds", json=body, headers=tx()
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def details(merchant: Merchant, link: dict[str, Any]) -> dict[str, Any]:
    answer = await merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def card_attempts(database: Database, link: dict[str, Any]) -> int:
    async with database.read_session() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(CardAttempt)
            .join(PaymentLink, PaymentLink.id == CardAttempt.link_id)
            .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
    return int(count or 0)


def plain(page: str) -> str:
    """The page's text with the spans that keep amounts whole taken out."""
    return re.sub(r'<span class="money">([^<]*)</span>', r"\1", page)


async def test_a_cancelled_link_says_so_and_offers_nothing(
    merchant: Merchant, payer_of: Callable[[dict[str, Any]], Payer]
) -> None:
    link = await create(merchant, amount=Decimal("87.50"), description="Pedido 77")
    payer = payer_of(link)
    opened = await payer.page()  # the payer had the page open before the merchant cancelled
    assert "data-card-form" in opened and "data-simulate" in opened
    await cancel(merchant, link)
    answer = await payer.open()
    assert answer.status_code == 200
    page = plain(answer.text)
    assert 'data-status="CANCELLED"' in page and "Link de pagamento cancelado" in page
    assert "TUCANO SANDBOX cancelou este link de pagamento. Ele não pode mais ser pago." in page
    assert "R$ 87,50" in page and "Pedido 77" in page and "Nada foi cobrado" in page
    # Nothing to pay with: no form, no Pix code, no simulation, no "check the code" hint.
    assert "<form" not in page and "data-pix-code" not in page
    assert "Simular pagamento PIX" not in page and "Número do cartão" not in page
    assert "onfirme o código antes de pagar" not in page
    assert "Aguardando pagamento" not in page and "data-checkout" not in page
    status = await payer.http.get(checkout_path(link).replace("?", "/status?"))
    assert status.json() == {"status": "CANCELLED"}
    english = await payer.http.get(checkout_path(link), headers={"accept-language": "en"})
    assert "TUCANO SANDBOX cancelled this payment link. It can no longer be paid." in english.text


@pytest.mark.parametrize("form", ["card", "pix simulation"])
async def test_the_forms_of_a_cancelled_link_charge_nothing(
    service: RunningService,
    merchant: Merchant,
    payer_of: Callable[[dict[str, Any]], Payer],
    form: str,
) -> None:
    link = await create(merchant, amount=Decimal("20.00"))
    payer = payer_of(link)
    opened = await payer.page()
    await cancel(merchant, link)

    async def submit(headers: dict[str, str]) -> Any:
        if form == "card":
            action, fields = form_action(opened, "data-card-form"), card_form(opened)
        else:
            action = form_action(opened, "data-simulate")
            fields = {"csrf_token": hidden_token(opened)}
        return await payer.http.post(action, data=fields, headers=headers)

    # A browser is sent to the page, which says the link was cancelled.
    in_browser = await submit(payer.headers)
    assert in_browser.status_code == 303
    assert in_browser.headers["location"] == checkout_path(link)
    # Any other client is told the link cannot be paid, and why.
    body = assert_error_body(await submit(JSON), 409, ErrorCode.PAYMENT_LINK_NOT_PAYABLE)
    assert body["errors"] == ["the payment link is CANCELLED, not CREATED"]
    shown = await details(merchant, link)
    assert shown["status"]["description"] == "CANCELLED" and shown.get("payment") is None
    assert await card_attempts(service.database, link) == 0


async def test_a_cancelled_link_says_so_after_its_expiration_date_too(
    service: RunningService,
) -> None:
    with clock.freeze(datetime(2031, 3, 1, 12, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, expirationDays=1)
        await cancel(merchant, link)
        frozen.advance(timedelta(days=3))  # past the link's and the token's expiry
        answer = await service.http.get(checkout_path(link), headers={"accept": "text/html"})
    assert answer.status_code == 200 and 'data-status="CANCELLED"' in answer.text


async def test_a_refunded_link_shows_its_receipt_with_each_refund_in_brasilia_time(
    service: RunningService, payer_of: Callable[[dict[str, Any]], Payer]
) -> None:
    with clock.freeze(datetime(2030, 5, 2, 2, 30, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, amount=Decimal("150.00"), numbersInstallments=3)
        payer = payer_of(link)
        opened = await payer.page()
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
        # 02:50 UTC is 23:50 of the day before in Brasília.
        frozen.advance(timedelta(minutes=20))
        await refund(merchant, link, amount=30.5, reason="Cliente desistiu de um item")
        frozen.advance(timedelta(minutes=5))
        failed = await refund(merchant, link, amount=5.13, reason="motivo interno")
        assert failed["status"] == "FAILED" and failed["failureReason"]
        frozen.advance(timedelta(minutes=10))
        await refund(merchant, link)  # the rest: 119.50
        answer = await payer.open()
    assert answer.status_code == 200
    page = plain(answer.text)
    assert 'data-status="REFUNDED"' in page and ">Reembolsado<" in page
    # Still the receipt of the payment, plus what was given back.
    assert "Pagamento aprovado" in page and "R$ 150,00" in page
    assert "3x de R$ 50,00" in page
    assert "Reembolsado integralmente" in page
    refunds = re.findall(r'<li data-refund="(\w+)">([^<]*)</li>', page)
    assert refunds == [
        ("SUCCEEDED", "R$ 30,50 em 01/05/2030 23:50 (horário de Brasília)"),
        ("SUCCEEDED", "R$ 119,50 em 02/05/2030 00:05 (horário de Brasília)"),
    ]
    assert re.search(r"Total reembolsado</dt><dd data-refunded-total>R\$ 150,00<", page)
    assert "volta ao cartão usado no pagamento" in page
    # A failed refund is the merchant's business: neither it nor any reason reaches the payer.
    assert failed["failureReason"] not in page and "13 cents" not in page
    assert "R$ 5,13" not in page and "motivo interno" not in page
    assert "Cliente desistiu" not in page and "<form" not in page
    # Its forms charge nothing: the receipt for a browser, 409 for any other client.
    again = await payer.pay_by_card(APPROVED_VISA, page=opened)
    assert again.status_code == 303
    payer.headers.update(JSON)
    body = assert_error_body(
        await payer.pay_by_card(APPROVED_VISA, page=opened),
        409,
        ErrorCode.PAYMENT_LINK_NOT_PAYABLE,
    )
    assert body["errors"] == ["the payment link is REFUNDED, not CREATED"]
    assert await card_attempts(service.database, link) == 0
    english = await payer.http.get(checkout_path(link), headers={"accept-language": "en"})
    assert "R$ 30.50 on 2030-05-01 23:50 (Brasília time)" in plain(english.text)
    assert "Refunded in full" in english.text


async def test_a_pix_refund_in_progress_then_done_in_part(
    service: RunningService, payer_of: Callable[[dict[str, Any]], Payer]
) -> None:
    with clock.freeze(datetime(2030, 7, 10, 15, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, amount=Decimal("40.00"))
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
        payer = payer_of(link)
        pending = await refund(merchant, link, amount=15)
        assert pending["status"] == "PENDING"
        page = plain(await payer.page())
        assert 'data-status="PAID"' in page and "Reembolso em processamento" in page
        assert re.findall(r'<li data-refund="(\w+)">([^<]*)</li>', page) == [
            ("PENDING", "R$ 15,00: reembolso em processamento")
        ]
        assert "Total reembolsado" not in page and "Reembolsado" not in page
        frozen.advance(timedelta(seconds=6))
        assert await run_due_refunds(service.database, service.app.state.refunder) == 1
        page = plain(await payer.page())
    assert 'data-status="PAID"' in page and "Reembolsado parcialmente" in page
    assert "Reembolsado integralmente" not in page and "em processamento" not in page
    assert re.findall(r'<li data-refund="(\w+)">([^<]*)</li>', page) == [
        ("SUCCEEDED", "R$ 15,00 em 10/07/2030 12:00 (horário de Brasília)")
    ]
    assert re.search(r"Total reembolsado</dt><dd data-refunded-total>R\$ 15,00<", page)
    assert "volta à conta de onde saiu o Pix" in page and "R$ 40,00" in page


# A processor during whose answer the merchant cancels the link (the test sets what it does).
WHILE_AUTHORIZING: list[Callable[[], Awaitable[None]]] = []
VOIDED: list[str] = []


class SlowProcessor:
    name = "slow"

    async def authorize(self, authorization: Any) -> Any:
        from tucano.checkout.card_processor import Approved

        for meanwhile in WHILE_AUTHORIZING:
            await meanwhile()
        return Approved("246810")

    async def void(self, *, nsu: str, authorization: Any) -> None:
        VOIDED.append(nsu)

    async def refund(self, *, nsu: str, amount_cents: int, reference: str) -> Any:
        raise AssertionError("nothing to refund")


def slow_processor(settings: Any) -> SlowProcessor:
    return SlowProcessor()


async def test_a_link_cancelled_while_its_card_is_charged_is_not_paid_and_the_charge_undone(
    database_url: str, database: Database
) -> None:
    settings = make_settings(
        database_url, card_processor="tests.checkout.test_lifecycle_page:slow_processor"
    )
    async with serving(settings, database) as running:
        merchant = await running.merchant()
        link = await create(merchant, amount=Decimal("33.00"))
        payer = Payer(running, link)
        WHILE_AUTHORIZING[:] = [lambda: cancel(merchant, link)]
        VOIDED.clear()
        try:
            answer = await payer.pay_by_card(APPROVED_VISA)
            assert answer.status_code == 303
            assert answer.headers["location"] == checkout_path(link)
            assert VOIDED == ["246810"]
            page = await payer.page()
            assert 'data-status="CANCELLED"' in page and "Pagamento aprovado" not in page
        finally:
            WHILE_AUTHORIZING.clear()
            await payer.close()
        shown = await details(merchant, link)
        assert shown["status"]["description"] == "CANCELLED" and shown.get("payment") is None
