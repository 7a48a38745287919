"""Paying a link by card on its checkout, over HTTP on each database, as a browser without
JavaScript does: the sandbox's test cards, refusals and the lock, forgery, and what is kept."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select, text

from tests.support.payer import (
    APPROVED_VISA,
    DECLINED,
    INSUFFICIENT_FUNDS,
    PROCESSING_ERROR,
    Payer,
    alert_of,
    card_form,
    checkout_path,
    form_action,
    hidden_token,
)
from tests.support.payment_links import BASE, create, tx
from tests.support.service import Merchant, RunningService, assert_error_body, start_service
from tests.support.settings import make_settings
from tucano.checkout.models import CardAttempt
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.deliveries.models import Event
from tucano.payment_links.models import Payment, PaymentLink


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


@pytest.fixture
async def payer_of(service: RunningService) -> AsyncIterator[Any]:
    payers: list[Payer] = []

    def make(link: dict[str, Any], **headers: str) -> Payer:
        payer = Payer(service, link)
        payer.headers.update(headers)
        payers.append(payer)
        return payer

    yield make
    for payer in payers:
        await payer.close()


async def details(merchant: Merchant, link: dict[str, Any]) -> dict[str, Any]:
    answer = await merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_an_approved_card_in_three_installments_pays_the_link_and_shows_the_receipt(
    service: RunningService, merchant: Merchant, payer_of: Any
) -> None:
    link = await create(merchant, amount=Decimal("100.00"), numbersInstallments=5)
    payer = payer_of(link)
    open_page = await payer.page()
    answer = await payer.pay_by_card(APPROVED_VISA, installments=3, page=open_page)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == checkout_path(link)
    receipt = await payer.page()
    assert "Pagamento aprovado" in receipt and 'data-status="PAID"' in receipt
    assert "Cartão de crédito Visa final 4242" in receipt
    assert (
        '3x: 1ª de <span class="money">R$ 33,34</span> e 2x de <span class="money">R$ 33,33</span>'
        in receipt
    )
    assert "<form" not in receipt and "onfirme o código antes de pagar" not in receipt
    paid = await details(merchant, link)
    assert paid["status"] == {"code": 2, "description": "PAID"}
    payment = paid["payment"]
    assert payment["paymentMethod"] == 1 and payment["installments"] == 3
    assert re.fullmatch(r"[0-9]{6,12}", payment["paymentReceipt"])
    assert payment["paymentReceipt"] in receipt
    async with service.database.session() as session:
        stored = await session.scalar(
            select(Payment)
            .join(PaymentLink)
            .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
        assert stored is not None and stored.installment_cents == "3334,3333,3333"
        event = await session.scalar(
            select(Event)
            .where(
                Event.customer_id == merchant.customer_id,
                Event.event_type == "PAYMENT_LINK_INBOUND",
            )
            .order_by(Event.created_at.desc())
        )
    assert event is not None
    body = json.loads(event.payload)
    assert body["paymentLinkUuid"] == link["linkPaymentUuid"]
    assert body["paymentMethod"] == "CREDIT_CARD" and body["numbersInstallments"] == 3
    assert body["paymentReceipt"] == payment["paymentReceipt"]
    # Paid: the form is gone, and a second card submission charges nothing: a browser is
    # shown the receipt, any other client a 409.
    again = await payer.pay_by_card(APPROVED_VISA, page=open_page)
    assert again.status_code == 303
    payer.headers["accept"] = "application/json"
    assert_error_body(
        await payer.pay_by_card(APPROVED_VISA, page=open_page),
        409,
        ErrorCode.PAYMENT_LINK_NOT_PAYABLE,
    )
    assert (await details(merchant, link))["payment"] == payment


@pytest.mark.parametrize(
    ("number", "says"),
    [
        (DECLINED, "recusado pelo emissor"),
        (INSUFFICIENT_FUNDS, "limite ou saldo insuficiente"),
        (PROCESSING_ERROR, "Não foi possível processar"),
        ("4111 1111 1111 1111", "recusado pelo emissor"),  # any other valid number
    ],
)
async def test_a_refused_card_says_why_and_leaves_the_link_created(
    merchant: Merchant, payer_of: Any, number: str, says: str
) -> None:
    link = await create(merchant, amount=Decimal("50.00"), numbersInstallments=2)
    payer = payer_of(link)
    answer = await payer.pay_by_card(number, installments=2, holder="Ana Souza", expiry="08/29")
    assert answer.status_code == 402
    alert = alert_of(answer.text)
    assert alert is not None and says in alert
    assert number.replace(" ", "") not in answer.text and number not in answer.text
    number_field = re.search(r'<input id="card-number"[^>]*>', answer.text)
    code_field = re.search(r'<input id="card-security-code"[^>]*>', answer.text)
    assert number_field and code_field
    assert "value=" not in number_field.group(0) and "value=" not in code_field.group(0)
    # The name and expiry are kept for the next try; the number and code are not.
    assert 'value="Ana Souza"' in answer.text and 'value="08/29"' in answer.text
    assert '<option value="2" selected>' in answer.text
    assert (await details(merchant, link))["status"]["description"] == "CREATED"


async def test_a_json_client_gets_the_refusal_as_the_error_body(
    merchant: Merchant, payer_of: Any
) -> None:
    link = await create(merchant)
    payer = payer_of(link, accept="application/json")
    page = await payer.http.get(checkout_path(link), headers={"accept": "text/html"})
    answer = await payer.http.post(
        form_action(page.text, "data-card-form"),
        data=card_form(page.text, DECLINED),
        headers={"accept": "application/json"},
    )
    body = assert_error_body(answer, 402, ErrorCode.CARD_REFUSED)
    assert body["errors"] == ["the card was refused: DECLINED"]


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"number": "4242 4242 4242 4241"}, "card-number", "Número de cartão inválido"),
        ({"expiry": "01/20"}, "card-expiry", "vencido"),
        ({"expiry": "13/30"}, "card-expiry", "MM/AA"),
        ({"security_code": "12"}, "card-security-code", "3 dígitos"),
        (
            {"number": "3782 822463 10005", "security_code": "123"},
            "card-security-code",
            "4 dígitos",
        ),
        ({"holder": ""}, "card-holder", "nome"),
        ({"installments": 4}, "installments", "opções de parcelamento"),
    ],
)
async def test_an_invalid_field_is_named_on_the_page_and_nothing_is_charged(
    service: RunningService,
    merchant: Merchant,
    payer_of: Any,
    fields: dict[str, Any],
    field: str,
    says: str,
) -> None:
    link = await create(merchant, numbersInstallments=3)
    answer = await payer_of(link).pay_by_card(**fields)
    assert answer.status_code == 400
    error = re.search(rf'id="{field}-error">([^<]+)<', answer.text)
    assert error is not None and says in error.group(1), answer.text
    assert f'id="{field}" ' in answer.text and 'aria-invalid="true"' in answer.text
    async with service.database.session() as session:
        attempts = await session.scalar(
            select(CardAttempt.id)
            .join(PaymentLink, PaymentLink.id == CardAttempt.link_id)
            .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
    assert attempts is None  # nothing reached the processor, nothing counts toward the lock


async def test_five_refusals_lock_card_payment_of_the_link_for_fifteen_minutes(
    service: RunningService, payer_of: Any
) -> None:
    with clock.freeze(datetime(2031, 3, 1, 12, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link, other = await create(merchant), await create(merchant)
        payer = payer_of(link)
        for attempt in range(1, 6):
            answer = await payer.pay_by_card(DECLINED)
            assert answer.status_code == 402, attempt
        assert "bloqueado após 5 tentativas" in (alert_of(answer.text) or "")
        assert "09:15" in (alert_of(answer.text) or "")  # 12:15 UTC, in Brasília time
        page = await payer.page()
        assert "data-card-form" not in page and "bloqueado" in page
        assert "data-pix" in page  # PIX is still offered
        # Even the approved test card is not sent to the processor meanwhile.
        locked = await payer.http.post(
            checkout_path(link).replace("?", "/card?"), data=card_form(page), headers=payer.headers
        )
        assert locked.status_code == 429 and locked.headers["retry-after"] == "901"
        as_json = await payer.http.post(
            checkout_path(link).replace("?", "/card?"), data=card_form(page)
        )
        body = assert_error_body(as_json, 429, ErrorCode.CARD_PAYMENT_LOCKED)
        assert body["errors"] == [
            "card payment of this link is locked after 5 refusals, until 2031-03-01T12:15:00.000Z"
        ]
        # Another link of the same merchant is not locked.
        assert (await payer_of(other).pay_by_card(APPROVED_VISA)).status_code == 303
        frozen.advance(timedelta(minutes=15))
        assert (await payer.pay_by_card(APPROVED_VISA)).status_code == 303
    assert (await details(merchant, link))["status"]["description"] == "PAID"


async def test_after_a_lock_ends_five_more_refusals_lock_it_again(
    service: RunningService, payer_of: Any
) -> None:
    with clock.freeze(datetime(2031, 4, 1, 12, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant)
        payer = payer_of(link)
        for _ in range(5):
            await payer.pay_by_card(DECLINED)
        frozen.advance(timedelta(minutes=15, seconds=1))
        for attempt in range(4):
            assert (await payer.pay_by_card(DECLINED)).status_code == 402, attempt
            assert "data-card-form" in await payer.page()
        assert (await payer.pay_by_card(DECLINED)).status_code == 402
        assert "data-card-form" not in await payer.page()


@pytest.mark.parametrize("how", ["no field", "another page's field", "no cookie", "cross-site"])
async def test_a_forged_submission_is_refused_and_charges_nothing(
    service: RunningService, merchant: Merchant, payer_of: Any, how: str
) -> None:
    link, other = await create(merchant), await create(merchant)
    payer = payer_of(link)
    page = await payer.page()
    fields = card_form(page)
    headers = dict(payer.headers)
    if how == "no field":
        del fields["csrf_token"]
    elif how == "another page's field":
        fields["csrf_token"] = hidden_token(await payer_of(other).page())
    elif how == "no cookie":
        payer.http.cookies.clear()
    else:
        headers["sec-fetch-site"] = "cross-site"
    held = payer.http.cookies.get("tucano_checkout")
    answer = await payer.http.post(
        form_action(page, "data-card-form"), data=fields, headers=headers
    )
    assert answer.status_code == 403
    if held is not None:  # a forged form does not replace the payer's nonce (voiding its forms)
        assert "set-cookie" not in answer.headers
    assert "expirou" in answer.text and APPROVED_VISA.replace(" ", "") not in answer.text
    assert (await details(merchant, link))["status"]["description"] == "CREATED"
    json_answer = await payer.http.post(
        form_action(page, "data-card-form"), data=fields, headers={**headers, "accept": "*/*"}
    )
    assert_error_body(json_answer, 403, ErrorCode.CHECKOUT_FORM_EXPIRED)


async def test_the_form_must_be_a_form(merchant: Merchant, payer_of: Any) -> None:
    link = await create(merchant)
    payer = payer_of(link)
    page = await payer.page()
    action = form_action(page, "data-card-form")
    as_json = await payer.http.post(
        action, json={"csrf_token": hidden_token(page)}, headers={"accept": "*/*"}
    )
    assert_error_body(as_json, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    twice = await payer.http.post(
        action,
        content=f"csrf_token={hidden_token(page)}&installments=1&installments=2",
        headers={"content-type": "application/x-www-form-urlencoded", "accept": "*/*"},
    )
    assert_error_body(twice, 400, ErrorCode.INVALID_PARAMETERS)


async def test_card_numbers_and_security_codes_are_never_stored_or_logged(
    service: RunningService, merchant: Merchant, payer_of: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    link = await create(merchant, amount=Decimal("30.00"), numbersInstallments=3)
    payer = payer_of(link)
    await payer.pay_by_card(DECLINED, security_code="731")
    await payer.pay_by_card("5555 5555 5555 4444", installments=2, security_code="842")
    logs = capfd.readouterr()
    written = logs.out + logs.err
    assert "card_payment_approved" in written  # the log was captured
    dumped = await dump_database(service.database)
    for secret in ("4000000000000002", "5555555555554444", "4000 0000", "5555 5555"):
        assert secret not in written, secret
    # A security code is three digits: found on its own, not inside a longer number or id.
    for code in ("731", "842"):
        assert not re.search(rf"(?<![0-9A-Za-z]){code}(?![0-9A-Za-z])", written), code
    for secret in ("4000000000000002", "5555555555554444", "5555 5555 5555 4444"):
        assert secret not in dumped, secret
    # What is kept: the brand and the last four digits.
    async with service.database.session() as session:
        kept = (
            await session.execute(
                select(CardAttempt.brand, CardAttempt.last4, CardAttempt.status)
                .join(PaymentLink, PaymentLink.id == CardAttempt.link_id)
                .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
                .order_by(CardAttempt.id)
            )
        ).all()
    assert [tuple(row) for row in kept] == [
        ("Visa", "0002", "REFUSED"),
        ("Mastercard", "4444", "APPROVED"),
    ]


async def dump_database(database: Database) -> str:
    """Every value of every table, as text."""
    async with database.session() as session:
        connection = await session.connection()
        if database.dialect == "postgresql":
            names = (
                (
                    await connection.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                    )
                )
                .scalars()
                .all()
            )
        else:
            names = (
                (
                    await connection.execute(
                        text("SELECT name FROM sqlite_master WHERE type = 'table'")
                    )
                )
                .scalars()
                .all()
            )
        rows = []
        for name in names:
            every_row = text(f'SELECT * FROM "{name}"')  # noqa: S608 - the database's own tables
            rows += [repr(tuple(row)) for row in await connection.execute(every_row)]
    return "\n".join(rows)


async def test_production_without_a_card_processor_offers_no_card_form(
    production_service: RunningService,
) -> None:
    merchant = await production_service.merchant()
    link = await create(merchant)
    payer = Payer(production_service, link)
    try:
        page = await payer.page()
        assert "data-card-form" not in page and "Número do cartão" not in page
        answer = await payer.http.post(
            checkout_path(link).replace("?", "/card?"),
            data={"csrf_token": "x", "card_number": APPROVED_VISA},
            headers={"accept": "*/*"},
        )
        assert_error_body(answer, 403, ErrorCode.PAYMENT_METHOD_UNAVAILABLE)
    finally:
        await payer.close()


async def test_a_configured_processor_is_loaded_from_its_factory(
    database_url: str, database: Database
) -> None:
    running = await start_service(
        make_settings(
            database_url,
            environment="production",
            card_processor="tests.checkout.test_card_payments:approving_processor",
        ),
        database,
    )
    try:
        merchant = await running.merchant()
        link = await create(merchant, amount=Decimal("12.34"), numbersInstallments=2)
        payer = Payer(running, link)
        try:
            # Production's processor decides: this one approves whatever passes the form.
            answer = await payer.pay_by_card("4111 1111 1111 1111", installments=2)
            assert answer.status_code == 303
            assert APPROVALS[-1] == ("Visa", (617, 617))
        finally:
            await payer.close()
    finally:
        await running.stop()


async def test_an_approval_without_an_nsu_is_voided_and_pays_nothing(
    database_url: str, database: Database
) -> None:
    running = await start_service(
        make_settings(
            database_url,
            card_processor="tests.checkout.test_card_payments:processor_without_nsu",
        ),
        database,
    )
    VOIDED.clear()
    try:
        link = await create(await running.merchant())
        payer = Payer(running, link)
        try:
            answer = await payer.pay_by_card(APPROVED_VISA)
            assert answer.status_code == 402
            assert "Não foi possível processar" in (alert_of(answer.text) or "")
            assert VOIDED == ["abc"]
        finally:
            await payer.close()
    finally:
        await running.stop()


VOIDED: list[str] = []


class ProcessorWithoutNsu:
    name = "no-nsu"

    async def authorize(self, authorization: Any) -> Any:
        from tucano.checkout.card_processor import Approved

        return Approved("abc")

    async def void(self, *, nsu: str, authorization: Any) -> None:
        VOIDED.append(nsu)

    async def refund(self, *, nsu: str, amount_cents: int, reference: str) -> Any:
        raise AssertionError("nothing to refund")


def processor_without_nsu(settings: Any) -> ProcessorWithoutNsu:
    return ProcessorWithoutNsu()


APPROVALS: list[tuple[str, tuple[int, ...]]] = []


class ApprovingProcessor:
    name = "approving"

    async def authorize(self, authorization: Any) -> Any:
        from tucano.checkout.card_processor import Approved

        APPROVALS.append((authorization.card.brand_name, authorization.installment_cents))
        return Approved("123456")

    async def void(self, *, nsu: str, authorization: Any) -> None:
        raise AssertionError("nothing to void")

    async def refund(self, *, nsu: str, amount_cents: int, reference: str) -> Any:
        raise AssertionError("nothing to refund")


def approving_processor(settings: Any) -> ApprovingProcessor:
    return ApprovingProcessor()
