"""The payer's checkout in a real browser (Debian's Chromium), as a payer on a phone meets it:
paying by card in instalments and by Pix, refusals, an expired link, an altered address, the
page without JavaScript, in English, by keyboard alone; axe-core finds nothing serious."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.browser import accessibility_problems, decoded_qr, snap
from tests.support.payer import APPROVED_VISA, DECLINED, INSUFFICIENT_FUNDS, checkout_path
from tests.support.payment_links import BASE, create, tx
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService
from tucano.core.clock import clock


def address(shop: RunningService, link: dict[str, Any]) -> str:
    """urlPayment, on the server under test."""
    return shop.base_url + checkout_path(link)


async def status_of(merchant: Merchant, link: dict[str, Any]) -> str:
    answer = await merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
    return str(answer.json()["status"]["description"])


async def assert_accessible(page: Page) -> None:
    assert await accessibility_problems(page) == []


async def fill_card(
    page: Page, number: str, *, installments: str | None = None, security_code: str = "123"
) -> None:
    await page.get_by_label("Número do cartão").fill(number)
    await page.get_by_label("Nome impresso no cartão").fill("Maria da Silva")
    await page.get_by_label("Validade (MM/AA)").fill("12/39")
    await page.get_by_label("Código de segurança (CVV)").fill(security_code)
    if installments is not None:
        await page.get_by_label("Parcelas").select_option(label=installments)


async def test_a_card_in_three_installments_pays_the_link_and_the_merchant_hears_of_it(
    shop: RunningService, page: Page, receiver: Receiver
) -> None:
    merchant = await shop.merchant()
    hook = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": receiver.url("/paid"), "eventType": "PAYMENT_LINK_INBOUND"},
    )
    secret = hook.json()["secret"]
    link = await create(
        merchant,
        payerName="Maria da Silva",
        amount=Decimal("123.45"),
        numbersInstallments=6,
        description="Pedido 1042: cadeira de escritório",
    )
    await page.goto(address(shop, link))
    await expect(page.get_by_role("heading", name="Cobrança de TUCANO SANDBOX")).to_be_visible()
    await expect(page.get_by_text("R$ 123,45").first).to_be_visible()
    await expect(page.get_by_text("Confirme o código antes de pagar")).to_be_visible()
    await expect(page.get_by_text(str(link["verificationToken"]))).to_be_visible()
    await assert_accessible(page)
    await fill_card(page, APPROVED_VISA, installments="3x de R$ 41,15")
    await expect(page.get_by_text("Bandeira: Visa")).to_be_visible()
    await expect(page.get_by_label("Número do cartão")).to_have_value("4242 4242 4242 4242")
    await snap(page, "card-open")
    await page.get_by_role("button", name="Pagar").click()

    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
    receipt = page.locator("[data-receipt]")
    await expect(receipt).to_contain_text("Cartão de crédito Visa final 4242")
    await expect(receipt).to_contain_text("3x de R$ 41,15")
    await expect(page.locator("form")).to_have_count(0)
    await expect(page.get_by_text("Confirme o código antes de pagar")).to_have_count(0)
    await assert_accessible(page)
    await snap(page, "card-receipt")
    assert await status_of(merchant, link) == "PAID"

    (request,) = await receiver.wait_for("/paid", 1, timeout=15)
    event = StandardWebhook(secret).verify(request.body, request.headers)
    assert event["paymentLinkUuid"] == link["linkPaymentUuid"]
    assert event["paymentMethod"] == "CREDIT_CARD" and event["numbersInstallments"] == 3
    assert event["amount"] == 123.45 and event["status"] == "PAID"
    await expect(receipt).to_contain_text(event["paymentReceipt"])


@pytest.mark.parametrize(
    ("number", "reason", "name"),
    [
        (DECLINED, "Pagamento recusado pelo emissor do cartão", "card-declined"),
        (INSUFFICIENT_FUNDS, "limite ou saldo insuficiente", "card-insufficient-funds"),
    ],
)
async def test_a_refused_card_says_why_and_the_link_stays_open(
    shop: RunningService, page: Page, number: str, reason: str, name: str
) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, amount=Decimal("80.00"), numbersInstallments=2)
    await page.goto(address(shop, link))
    await fill_card(page, number, installments="2x de R$ 40,00")
    await page.get_by_role("button", name="Pagar").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text(reason)
    # Nothing of the card comes back but what the payer would retype anyway.
    await expect(page.get_by_label("Número do cartão")).to_have_value("")
    await expect(page.get_by_label("Código de segurança (CVV)")).to_have_value("")
    await expect(page.get_by_label("Nome impresso no cartão")).to_have_value("Maria da Silva")
    await expect(page.get_by_label("Parcelas")).to_have_value("2")
    await assert_accessible(page)
    await snap(page, name)
    assert await status_of(merchant, link) == "CREATED"


async def test_pix_paid_while_the_page_is_open_turns_it_into_the_receipt_without_a_reload(
    shop: RunningService, context: BrowserContext, page: Page
) -> None:
    await context.grant_permissions(["clipboard-read", "clipboard-write"])
    merchant = await shop.merchant()
    link = await create(merchant, amount=Decimal("59.90"))
    await page.goto(address(shop, link))
    code = (await page.locator("[data-pix-code]").text_content() or "").strip()
    assert code.startswith("000201") and "br.gov.bcb.pix" in code
    # The QR, read from the pixels as a bank app would, is exactly the copy-and-paste code.
    assert await decoded_qr(page.locator("[data-qr] svg")) == [code]
    await page.get_by_role("button", name="Copiar código PIX").click()
    await expect(page.get_by_role("status")).to_have_text("Código Pix copiado.")
    assert await page.evaluate("navigator.clipboard.readText()") == code
    await assert_accessible(page)
    await snap(page, "pix-open")

    await page.evaluate("window.stillTheSamePage = true")
    await page.get_by_role("button", name="Simular pagamento PIX").click()
    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible(
        timeout=15_000
    )
    assert await page.evaluate("window.stillTheSamePage === true")  # no navigation happened
    await expect(page.locator("[data-receipt]")).to_contain_text("Pix")
    await expect(page.locator("[data-pix-code]")).to_have_count(0)
    await assert_accessible(page)
    await snap(page, "pix-receipt")
    assert await status_of(merchant, link) == "PAID"


async def test_an_expired_link_opens_a_page_that_says_so(shop: RunningService, page: Page) -> None:
    with clock.freeze(datetime.now(UTC)) as frozen:
        merchant = await shop.merchant()
        link = await create(merchant, expirationDays=1)
        frozen.advance(timedelta(days=1, seconds=1))
        answer = await page.goto(address(shop, link))
        assert answer is not None and answer.status == 410
        await expect(
            page.get_by_role("heading", name="Este link de pagamento expirou")
        ).to_be_visible()
        await expect(page.locator("form")).to_have_count(0)
        await assert_accessible(page)
        await snap(page, "expired")


async def test_an_altered_address_opens_no_checkout(shop: RunningService, page: Page) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, payerName="Fulana Secreta")
    answer = await page.goto(address(shop, link)[:-3] + "abc")
    assert answer is not None and answer.status == 404
    await expect(
        page.get_by_role("heading", name="Link de pagamento não encontrado")
    ).to_be_visible()
    await expect(page.get_by_text("Fulana Secreta")).to_have_count(0)
    await assert_accessible(page)
    await snap(page, "not-found")


@pytest.mark.parametrize("context", [{"java_script_enabled": False}], indirect=True)
async def test_without_javascript_the_card_form_and_the_pix_simulation_still_pay(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, amount=Decimal("200.00"), numbersInstallments=4)
    await page.goto(address(shop, link))
    await expect(page.get_by_role("button", name="Copiar código PIX")).to_be_hidden()
    await expect(page.get_by_role("link", name="Já paguei: atualizar a página")).to_be_visible()
    await fill_card(page, APPROVED_VISA, installments="4x de R$ 50,00")
    await snap(page, "no-js-open")
    await page.get_by_role("button", name="Pagar").click()
    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
    await expect(page.locator("[data-receipt]")).to_contain_text("4x de R$ 50,00")
    await snap(page, "no-js-receipt")

    pix = await create(merchant, amount=Decimal("15.00"))
    await page.goto(address(shop, pix))
    await page.get_by_role("button", name="Simular pagamento PIX").click()
    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
    assert await status_of(merchant, pix) == "PAID"


@pytest.mark.parametrize("context", [{"locale": "en-US"}], indirect=True)
async def test_a_browser_that_prefers_english_gets_the_page_in_english(
    shop: RunningService, page: Page
) -> None:
    link = await create(await shop.merchant(), amount=Decimal("1234.50"), numbersInstallments=2)
    await page.goto(address(shop, link))
    await expect(page.get_by_role("heading", name="Pay with Pix")).to_be_visible()
    await expect(page.get_by_label("Card number")).to_be_visible()
    await expect(page.get_by_label("Installments")).to_contain_text("2x of R$ 617.25")
    assert await page.get_attribute("html", "lang") == "en"
    await assert_accessible(page)
    await snap(page, "english")


async def test_the_card_form_works_by_keyboard_alone_in_reading_order(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, amount=Decimal("90.00"), numbersInstallments=3)
    await page.goto(address(shop, link))
    await page.get_by_label("Número do cartão").focus()
    order = []
    for _ in range(6):
        order.append(
            await page.evaluate("document.activeElement.id || document.activeElement.textContent")
        )
        await page.keyboard.press("Tab")
    await page.get_by_label("Número do cartão").focus()
    ring = await page.evaluate(
        "[getComputedStyle(document.activeElement).outlineStyle,"
        " getComputedStyle(document.activeElement).outlineWidth]"
    )
    assert ring == ["solid", "3px"]  # where the focus is, is visible
    assert order == [
        "card-number",
        "card-holder",
        "card-expiry",
        "card-security-code",
        "installments",
        "Pagar",
    ]
    await page.get_by_label("Número do cartão").focus()
    await page.keyboard.type("5555555555554444")
    await page.keyboard.press("Tab")
    await page.keyboard.type("Maria da Silva")
    await page.keyboard.press("Tab")
    await page.keyboard.type("1239")
    await page.keyboard.press("Tab")
    await page.keyboard.type("321")
    await page.keyboard.press("Tab")
    await page.keyboard.press("ArrowDown")  # 2x
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")  # on the Pagar button
    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
    await expect(page.locator("[data-receipt]")).to_contain_text("Mastercard final 4444")
    await expect(page.locator("[data-receipt]")).to_contain_text("2x de R$ 45,00")
    assert await status_of(merchant, link) == "PAID"
