"""What a payer on a phone (390 x 844) notices on the checkout, as issue 36 found it: a refused
card in view and focused, with and without JavaScript; each instalment as it will be charged;
a card valid through December on New Year's Eve in Brasília; the words, the brand named by the
server's own table, amounts that do not wrap, and the expiry and CVV boxes side by side."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from playwright.async_api import Locator, Page, expect

from tests.browser.test_checkout import address, fill_card, status_of
from tests.support.browser import DESKTOP, PHONE
from tests.support.payer import APPROVED_VISA, DECLINED
from tests.support.payment_links import create
from tests.support.service import RunningService
from tucano.core.clock import clock

JAVASCRIPT = pytest.mark.parametrize(
    "context",
    [{}, {"java_script_enabled": False}],
    ids=["javascript", "no-javascript"],
    indirect=True,
)


async def assert_on_the_first_screen(element: Locator) -> None:
    """Wholly within the phone's screen as the page is, with no scrolling by the test."""
    box = await element.bounding_box()
    assert box is not None
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], box


@JAVASCRIPT
async def test_a_declined_card_opens_on_its_alert_in_view_and_focused(
    shop: RunningService, page: Page
) -> None:
    link = await create(await shop.merchant(), amount=Decimal("80.00"), numbersInstallments=2)
    await page.goto(address(shop, link))
    await fill_card(page, DECLINED, installments="2x de R$ 40,00")
    await page.get_by_role("button", name="Pagar").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("Pagamento recusado pelo emissor do cartão")
    await expect(alert).to_be_focused()
    await assert_on_the_first_screen(alert)


@JAVASCRIPT
async def test_an_invalid_field_opens_focused_and_in_view(shop: RunningService, page: Page) -> None:
    link = await create(await shop.merchant(), amount=Decimal("80.00"), numbersInstallments=2)
    await page.goto(address(shop, link))
    await fill_card(page, APPROVED_VISA)
    await page.get_by_label("Validade (MM/AA)").fill("13/30")
    await page.get_by_role("button", name="Pagar").click()
    await expect(page.get_by_role("alert")).to_contain_text("Confira os campos destacados")
    expiry = page.get_by_label("Validade (MM/AA)")
    await expect(expiry).to_be_focused()
    await assert_on_the_first_screen(expiry)


async def test_each_option_shows_the_instalments_as_charged_and_the_receipt_the_same(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    tiny = await create(merchant, amount=Decimal("0.98"), numbersInstallments=10)
    await page.goto(address(shop, tiny))
    options = page.get_by_label("Parcelas").locator("option")
    await expect(options).to_have_count(10)
    await expect(options.nth(9)).to_have_text("10x: 1ª de R$ 0,17 e 9x de R$ 0,09")
    cents = await create(merchant, amount=Decimal("0.03"), numbersInstallments=10)
    await page.goto(address(shop, cents))
    await expect(options).to_have_text(
        ["1x de R$ 0,03", "2x: 1ª de R$ 0,02 e 1x de R$ 0,01", "3x de R$ 0,01"]
    )

    link = await create(merchant, amount=Decimal("99.90"), numbersInstallments=4)
    await page.goto(address(shop, link))
    await expect(page.get_by_text("os centavos que sobram vão na 1ª parcela")).to_be_visible()
    await fill_card(page, APPROVED_VISA, installments="4x: 1ª de R$ 24,99 e 3x de R$ 24,97")
    await page.get_by_role("button", name="Pagar").click()
    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
    await expect(page.locator("[data-payment-installments]")).to_have_text(
        "4x: 1ª de R$ 24,99 e 3x de R$ 24,97"
    )


async def test_a_card_valid_through_december_pays_at_half_past_ten_on_new_years_eve_in_brasilia(
    shop: RunningService, page: Page
) -> None:
    # 31/12/2026 22:30 in Brasília is already 01/01/2027 in UTC.
    with clock.freeze(datetime(2027, 1, 1, 1, 30, tzinfo=UTC)):
        merchant = await shop.merchant()
        link = await create(merchant, amount=Decimal("50.00"), numbersInstallments=1)
        await page.goto(address(shop, link))
        await fill_card(page, APPROVED_VISA)
        await page.get_by_label("Validade (MM/AA)").fill("12/26")
        await page.get_by_role("button", name="Pagar").click()
        await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
        assert await status_of(merchant, link) == "PAID"


async def test_an_expiry_too_far_ahead_is_told_so(shop: RunningService, page: Page) -> None:
    link = await create(await shop.merchant(), amount=Decimal("50.00"))
    await page.goto(address(shop, link))
    await fill_card(page, APPROVED_VISA)
    await page.get_by_label("Validade (MM/AA)").fill("12/99")
    await page.get_by_role("button", name="Pagar").click()
    await expect(page.locator("#card-expiry-error")).to_have_text(
        "Confira o ano da validade: ele está mais de 20 anos à frente."
    )


async def test_the_words_a_payer_reads(shop: RunningService, page: Page) -> None:
    link = await create(await shop.merchant(), amount=Decimal("1234.50"), numbersInstallments=1)
    await page.goto(address(shop, link))
    pix = page.locator("[data-pix]")
    await expect(pix.get_by_role("heading", name="Pagar com Pix")).to_be_visible()
    await expect(pix).to_contain_text("Pix Copia e Cola")
    await expect(pix).to_contain_text(
        "Antes de confirmar, veja no app do banco se o nome de quem recebe é o de TUCANO SANDBOX."
    )
    # "PIX" only in the two labels decisions.md names literally.
    words = (await page.locator("main").inner_text()).replace("Simular pagamento PIX", "")
    assert "PIX" not in words.replace("Copiar código PIX", "")

    await fill_card(page, APPROVED_VISA)
    await page.get_by_role("button", name="Pagar").click()
    receipt = page.locator("[data-receipt]")
    await expect(receipt).to_contain_text("O pagamento já foi informado a TUCANO SANDBOX.")
    await expect(receipt).not_to_contain_text("avisado")


async def lines_of(element: Locator) -> int:
    """How many lines the element's text takes, squeezed to a few characters' width."""
    tops: Any = await element.evaluate(
        """(element) => {
            element.style.width = "3ch";  // as narrow as a long amount on a small phone
            const range = document.createRange();
            range.selectNodeContents(element);
            return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        }"""
    )
    return int(tops)


async def test_an_amount_never_wraps_between_its_currency_and_its_figure(
    shop: RunningService, page: Page
) -> None:
    link = await create(await shop.merchant(), amount=Decimal("80.00"))
    await page.goto(address(shop, link))
    assert await lines_of(page.locator("[data-checkout] [data-amount]")) == 1


async def test_the_brand_is_named_by_the_servers_table(shop: RunningService, page: Page) -> None:
    link = await create(await shop.merchant())
    await page.goto(address(shop, link))
    number, brand = page.get_by_label("Número do cartão"), page.locator("[data-card-brand]")
    await number.press_sequentially("5067780000000000")
    await expect(brand).to_have_text("Bandeira: Elo")
    await number.fill("")
    # 506779 is not Elo's (the published tables stop at 506778), as the server reads it.
    await number.press_sequentially("5067790000000000")
    await expect(number).to_have_value("5067 7900 0000 0000")
    await expect(brand).to_have_text("")


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["390", "1280"])
async def test_the_expiry_and_security_code_boxes_sit_side_by_side(
    shop: RunningService, page: Page, size: dict[str, int]
) -> None:
    await page.set_viewport_size(size)
    await page.goto(address(shop, await create(await shop.merchant())))
    expiry = await page.get_by_label("Validade (MM/AA)").bounding_box()
    code = await page.get_by_label("Código de segurança (CVV)").bounding_box()
    assert expiry is not None and code is not None
    assert expiry["y"] == code["y"] and expiry["height"] == code["height"]
    assert expiry["x"] < code["x"]
