"""The merchant portal in a real browser (Debian's Chromium): a session URL opens it with the
token gone from the address; the navigation and the webhooks table (with a webhook made through
the API and its deliveries' health) are there, on a phone without sideways scrolling and on a
laptop; axe-core finds nothing serious; a read-only session offers no action."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.async_api import Page, expect

from tests.support.browser import DESKTOP, PHONE, accessibility_problems, snap
from tests.support.deliveries import register, results_for
from tests.support.receivers import Receiver, always
from tests.support.service import Merchant, RunningService, serving

ENGLISH = pytest.mark.parametrize("context", [{"locale": "en-US"}], indirect=True)
NAVIGATION = ["Webhooks", "Deliveries", "Event types", "Payment links", "Reports"]


async def session_path(merchant: Merchant, **body: object) -> str:
    made = await merchant.post("/portal/v1/sessions", json=body)
    assert made.status_code == 201, made.text
    url = urlsplit(made.json()["url"])
    return f"{url.path}?{url.query}"


async def no_sideways_scrolling(page: Page) -> bool:
    return bool(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


@ENGLISH
async def test_a_session_url_opens_the_portal_on_its_webhooks(
    shop: RunningService, page: Page, receiver: Receiver
) -> None:
    merchant = await shop.merchant()
    receiver.behaviours["/orders/refused"] = always(500)
    paid = await register(merchant, receiver, "/orders/paid", "PAYMENT_LINK_INBOUND")
    await register(merchant, receiver, "/orders/refused", "PIX_QR_INBOUND")
    for event_type in ("PAYMENT_LINK_INBOUND", "PIX_QR_INBOUND"):
        sent = await merchant.post("/webhook/v1/test-events", json={"eventType": event_type})
        assert sent.status_code == 202, sent.text
    await results_for(merchant, 1, webhookId=paid["webhookId"])
    await results_for(merchant, 1, status="PENDING_RETRY")

    start = await session_path(merchant)
    await page.goto(shop.base_url + start)
    assert page.url == shop.base_url + "/portal"  # the token is gone from the address
    await expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    sections = page.get_by_role("navigation", name="Portal sections")
    for name in NAVIGATION:
        await expect(sections.get_by_role("link", name=name, exact=True)).to_be_visible()
    await snap(page, "portal-home")

    await sections.get_by_role("link", name="Webhooks", exact=True).click()
    await expect(page.get_by_role("heading", name="Webhooks", level=1)).to_be_visible()
    await expect(sections.get_by_role("link", name="Webhooks")).to_have_attribute(
        "aria-current", "page"
    )
    table = page.get_by_role("table", name=f"Webhooks of customer {merchant.customer_id}")
    await expect(table.get_by_role("columnheader")).to_have_text(
        ["Target URL", "Event type", "Active", "Success (7 days)", "Last attempt", "Actions"]
    )
    row = table.get_by_role("row").filter(has_text=receiver.url("/orders/paid"))
    await expect(row).to_contain_text("PAYMENT_LINK_INBOUND")
    await expect(row).to_contain_text("100% (1 of 1)")
    await expect(row).to_contain_text("succeeded · HTTP 200")
    failing = table.get_by_role("row").filter(has_text=receiver.url("/orders/refused"))
    await expect(failing).to_contain_text("HTTP 500")
    await expect(
        row.get_by_role("button", name=f"Deactivate the webhook {receiver.url('/orders/paid')}")
    ).to_be_visible()

    assert await accessibility_problems(page) == []
    assert await no_sideways_scrolling(page)
    await snap(page, "portal-webhooks")
    await page.set_viewport_size(DESKTOP)
    assert await accessibility_problems(page) == []
    await page.set_viewport_size(PHONE)

    # The address cannot be used again, from this browser or any other.
    await page.goto(shop.base_url + start)
    await expect(
        page.get_by_role("heading", name="This portal address has already been used")
    ).to_be_visible()


async def test_a_read_only_session_by_keyboard_in_portuguese(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://loja.example.com.br/webhooks", "eventType": "PIX_OUTBOUND"},
    )
    assert created.status_code == 200, created.text
    await page.goto(shop.base_url + await session_path(merchant, readOnly=True))
    await page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Pular para o conteúdo")
    await expect(skip).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_be_focused()
    await page.get_by_role("link", name="Webhooks", exact=True).click()
    await expect(page.get_by_text("Sessão somente leitura")).to_be_visible()
    table = page.get_by_role("table")
    await expect(table).to_contain_text("https://loja.example.com.br/webhooks")
    await expect(table.get_by_role("button")).to_have_count(0)
    for name in ("Entregas", "Tipos de evento", "Links de pagamento", "Relatórios"):
        await expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    assert await accessibility_problems(page) == []
    assert await no_sideways_scrolling(page)
    await snap(page, "portal-read-only")


async def test_an_operators_dashboard_of_an_allowed_origin_embeds_the_portal(
    shop: RunningService, page: Page, receiver: Receiver
) -> None:
    # The dashboard is another origin (the receiver's port); TUCANO_PORTAL_FRAME_ANCESTORS names it.
    settings = shop.settings.model_copy(update={"portal_frame_ancestors": receiver.base_url})
    async with serving(settings, shop.database) as framed:
        merchant = await framed.merchant()
        start = framed.base_url + await session_path(merchant, locale="en")
        receiver.behaviours["/dashboard"] = always(
            200,
            f'<!doctype html><html lang="en"><title>Dashboard</title><main><h1>Dashboard</h1>'
            f'<iframe title="Merchant portal" src="{start}" width="1000" height="600"></iframe>'
            "</main></html>",
            **{"Content-Type": "text/html; charset=utf-8"},
        )
        await page.set_viewport_size(DESKTOP)
        await page.goto(receiver.url("/dashboard"))
        portal = page.frame_locator('iframe[title="Merchant portal"]')
        await expect(portal.get_by_role("heading", name="Overview", level=1)).to_be_visible()
        await portal.get_by_role("link", name="Webhooks", exact=True).click()
        await expect(portal.get_by_role("heading", name="Webhooks", level=1)).to_be_visible()
        await expect(portal.get_by_text("No webhook registered yet.")).to_be_visible()
