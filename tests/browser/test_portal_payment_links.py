"""The portal's payment links and reports in Chromium, in an English session, found by the names
decisions.md fixes: a link created through the form, found in the list, its URL copied and read
back from its QR code, then cancelled; a paid link refunded in part; the reports' chart and CSV;
a read-only session with no action; another customer's link not found."""

from __future__ import annotations

import asyncio
import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.browser.test_portal import no_sideways_scrolling, session_path
from tests.support.browser import DESKTOP, PHONE, accessibility_problems, decoded_qr, snap
from tests.support.payment_links import create, pay
from tests.support.service import RunningService
from tucano.payment_links.domain import METHOD_CARD

ENGLISH = pytest.mark.parametrize(
    "context",
    [{"locale": "en-US", "permissions": ["clipboard-read", "clipboard-write"]}],
    indirect=True,
)


async def checked(page: Page) -> None:
    """axe-core finds nothing serious at either width, and a phone never scrolls sideways."""
    assert await accessibility_problems(page) == []
    assert await no_sideways_scrolling(page)
    await page.set_viewport_size(DESKTOP)
    assert await accessibility_problems(page) == []
    await page.set_viewport_size(PHONE)


@ENGLISH
async def test_a_link_is_created_found_copied_and_cancelled(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    await create(merchant, payerName="Earlier Payer", amount=Decimal("10.00"))
    await page.goto(shop.base_url + await session_path(merchant))
    await page.get_by_role("link", name="Payment links", exact=True).click()
    await page.get_by_role("link", name="Create payment link").click()
    await page.get_by_label("Payer's name").fill("Helena Souza")
    await page.get_by_label("Payer's CPF or CNPJ").fill("529.982.247-25")
    await page.get_by_label("Amount (R$)").fill("1,234.56")
    await page.get_by_label("Card instalments (up to)").fill("4")
    await page.get_by_label("Valid for (days)").fill("3")
    await page.get_by_label("Description (optional)").fill("Order 981")
    await page.get_by_label("Your reference (optional)").fill("order-981")
    await page.get_by_role("button", name="Create payment link").click()

    await expect(page.get_by_role("status").first).to_have_text(
        "Payment link created. Send its URL to the payer."
    )
    await expect(page.get_by_role("heading", level=1)).to_have_text("Payment link for Helena Souza")
    url = (await page.locator("#checkout-url").text_content() or "").strip()
    assert url.startswith("http://") and "/checkout/" in url
    await page.get_by_role("button", name="Copy").click()
    await expect(page.get_by_text("URL copied.")).to_be_visible()
    assert await page.evaluate("navigator.clipboard.readText()") == url
    qr = page.get_by_role("img", name="QR code of the checkout URL")
    assert await decoded_qr(qr) == [url]
    facts = page.locator("dl.facts").first
    await expect(facts).to_contain_text("R$ 1,234.56")
    await expect(facts).to_contain_text("up to 4x")
    await checked(page)
    await snap(page, "portal-payment-link")

    await page.get_by_role("link", name="Back to the payment links").click()
    table = page.get_by_role("table")
    rows = table.get_by_role("row")
    await expect(rows.nth(1)).to_contain_text("Helena Souza")  # the newest first
    await expect(rows.nth(1)).to_contain_text("R$ 1,234.56")
    await expect(rows.nth(2)).to_contain_text("Earlier Payer")
    await checked(page)
    await snap(page, "portal-payment-links")

    await table.get_by_role("link", name="Helena Souza").click()
    page.once("dialog", lambda dialog: dialog.accept())
    await page.get_by_role("button", name="Cancel link").click()
    await expect(page.get_by_role("status").first).to_have_text(
        "Link cancelled: the checkout takes no more payments."
    )
    await expect(page.locator("[data-status]")).to_have_text("Cancelled")
    await expect(page.get_by_role("button", name="Cancel link")).to_have_count(0)


@ENGLISH
async def test_a_paid_link_is_refunded_in_part(shop: RunningService, page: Page) -> None:
    merchant = await shop.merchant()
    link = await create(merchant, payerName="Rafael Lima", amount=Decimal("100.00"))
    await pay(shop, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=2)
    await page.goto(shop.base_url + await session_path(merchant))
    await page.get_by_role("link", name="Payment links", exact=True).click()
    await page.get_by_role("link", name="Rafael Lima").click()
    await expect(page.locator("[data-status]")).to_have_text("Paid")
    amount = page.get_by_label("Amount to give back (R$)")
    await expect(amount).to_have_value("100.00")  # all that is left, unless changed
    await amount.fill("40.00")
    await page.get_by_label("Reason (optional, only you see it)").fill("One item out of stock")
    await page.get_by_role("button", name="Refund").click()

    await expect(page.get_by_role("status").first).to_have_text("Refund of R$ 40.00 succeeded.")
    await expect(page.locator("[data-status]")).to_have_text("Partially refunded")
    refunds = page.get_by_role("table", name="This link's refunds, oldest first")
    await expect(refunds.get_by_role("row").nth(1)).to_contain_text("R$ 40.00")
    await expect(refunds.get_by_role("row").nth(1)).to_contain_text("Succeeded")
    await expect(refunds.get_by_role("row").nth(1)).to_contain_text("One item out of stock")
    await expect(page.get_by_label("Amount to give back (R$)")).to_have_value("60.00")
    await checked(page)


@ENGLISH
async def test_reports_draw_the_days_and_download_the_csv(shop: RunningService, page: Page) -> None:
    merchant = await shop.merchant()
    links = [await create(merchant, amount=Decimal(amount)) for amount in ("80.00", "120.50")]
    await pay(shop, merchant, links[1]["linkPaymentUuid"], METHOD_CARD)
    await page.goto(shop.base_url + await session_path(merchant))
    await page.get_by_role("link", name="Reports", exact=True).click()
    await expect(page.get_by_role("heading", name="Reports", level=1)).to_be_visible()
    chart = page.get_by_role("img", name="Amount of the links created per day")
    await expect(chart).to_be_visible()
    await expect(chart.locator("rect")).to_have_count(30)
    days = page.get_by_role("table", name="Links created per day")
    await expect(days.get_by_role("row").nth(1)).to_contain_text("R$ 200.50")
    by_status = page.get_by_role("table", name="Links by status")
    await expect(by_status.get_by_role("row").filter(has_text="Paid")).to_contain_text("R$ 120.50")
    await checked(page)
    await snap(page, "portal-reports")

    async with page.expect_download() as started:
        await page.get_by_role("button", name="Download CSV").click()
    download = await started.value
    assert download.suggested_filename.startswith("payment-links-")
    saved = await asyncio.to_thread(Path(await download.path()).read_text, "utf-8")
    rows = list(csv.DictReader(io.StringIO(saved)))
    assert sorted(row["linkPaymentUuid"] for row in rows) == sorted(
        link["linkPaymentUuid"] for link in links
    )


async def test_a_read_only_session_has_no_action_and_another_customers_link_is_not_found(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    other = await shop.merchant()
    created = await create(merchant, payerName="Somente Leitura")
    paid = await create(merchant, payerName="Pago Leitura")
    await pay(shop, merchant, paid["linkPaymentUuid"], METHOD_CARD)
    theirs = await create(other, payerName="Outro Cliente")
    await page.goto(shop.base_url + await session_path(merchant, readOnly=True, locale="en"))
    await page.get_by_role("link", name="Payment links", exact=True).click()
    await expect(page.get_by_role("link", name="Create payment link")).to_have_count(0)
    await page.get_by_role("link", name="Somente Leitura").click()
    await expect(page.get_by_text("Read-only session")).to_be_visible()
    await expect(page.get_by_role("button", name="Cancel link")).to_have_count(0)
    await expect(page.get_by_role("button", name="Copy")).to_be_visible()  # copying changes nothing
    await page.go_back()
    await page.get_by_role("link", name="Pago Leitura").click()
    await expect(page.get_by_role("button", name="Refund")).to_have_count(0)
    token = await page.locator('input[name="csrf_token"]').first.input_value()
    refused = await page.request.post(
        f"{shop.base_url}/portal/payment-links/{created['linkPaymentUuid']}/cancel",
        form={"csrf_token": token},
    )
    assert refused.status == 403
    answer = await page.goto(f"{shop.base_url}/portal/payment-links/{theirs['linkPaymentUuid']}")
    assert answer is not None and answer.status == 404
    await expect(page.get_by_role("heading", name="Not found", level=1)).to_be_visible()
    await expect(page.get_by_text("Outro Cliente")).to_have_count(0)
