"""The checkout of a link the merchant refunded or cancelled, in Chromium: the receipt says what
was given back and when; an open page whose link is cancelled turns, by itself, into a notice
that offers nothing."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from playwright.async_api import Page, expect

from tests.support.browser import accessibility_problems, snap
from tests.support.payer import checkout_path
from tests.support.payment_links import BASE, create, pay, tx
from tests.support.service import RunningService
from tucano.brazil.brasilia_time import BRASILIA
from tucano.payment_links.domain import METHOD_CARD


def address(shop: RunningService, link: dict[str, Any]) -> str:
    return shop.base_url + checkout_path(link)


async def test_a_refunded_links_receipt_shows_what_was_given_back_and_when(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, amount=Decimal("80.00"), numbersInstallments=2)
    await pay(shop, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=2)
    answer = await merchant.post(
        f"{BASE}/{link['linkPaymentUuid']}/refunds", json={"amount": 30}, headers=tx()
    )
    assert answer.status_code == 201 and answer.json()["status"] == "SUCCEEDED"
    done = datetime.fromisoformat(answer.json()["completedAt"]).astimezone(BRASILIA)

    await page.goto(address(shop, link))
    await expect(page.get_by_role("heading", name="Pagamento aprovado")).to_be_visible()
    refunds = page.locator("[data-refunds]")
    await expect(refunds.get_by_role("heading", name="Reembolsado parcialmente")).to_be_visible()
    await expect(refunds.locator("li")).to_have_text(
        [f"R$ 30,00 em {done:%d/%m/%Y %H:%M} (horário de Brasília)"]
    )
    await expect(refunds.locator("[data-refunded-total]")).to_have_text("R$ 30,00")
    await expect(page.locator("[data-receipt] [data-amount]")).to_have_text("R$ 80,00")
    await expect(page.locator("form")).to_have_count(0)
    assert await accessibility_problems(page) == []
    await snap(page, "refunded")


async def test_an_open_page_whose_link_is_cancelled_turns_into_a_notice_with_no_form(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, amount=Decimal("45.00"), description="Pedido 9")
    await page.goto(address(shop, link))
    await expect(page.get_by_role("button", name="Pagar")).to_be_visible()
    answer = await merchant.post(f"{BASE}/{link['linkPaymentUuid']}/cancel", headers=tx())
    assert answer.status_code == 200

    # The open page notices by itself (it asks for the link's status every 3 seconds).
    heading = page.get_by_role("heading", name="Link de pagamento cancelado")
    await expect(heading).to_be_visible(timeout=15_000)
    await expect(
        page.get_by_text(
            "TUCANO SANDBOX cancelou este link de pagamento. Ele não pode mais ser pago."
        )
    ).to_be_visible()
    await expect(page.locator("form")).to_have_count(0)
    await expect(page.locator("[data-pix-code]")).to_have_count(0)
    await expect(page.get_by_role("button")).to_have_count(0)

    reloaded = await page.goto(address(shop, link))
    assert reloaded is not None and reloaded.status == 200
    await expect(heading).to_be_visible()
    await expect(page.locator("[data-amount]")).to_have_text("R$ 45,00")
    await expect(page.locator("form")).to_have_count(0)
    assert await accessibility_problems(page) == []
    await snap(page, "cancelled")
