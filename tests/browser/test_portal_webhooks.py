"""The portal's webhook actions in a real browser (Debian's Chromium), by the names decisions.md
fixes: Create webhook (a private address refused beside its field first), Send test event (the
receiver gets it, signed with the secret the page reveals), Rotate secret (the next event signed
with the new secret and the old), and deleting it after a confirmation; axe-core and no sideways
scrolling at 390 px on each page; a read-only session offers none of it, and is refused it."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.async_api import BrowserContext, Page, expect
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.browser import accessibility_problems, snap
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService

ENGLISH = pytest.mark.parametrize("context", [{"locale": "en-US"}], indirect=True)


async def session_path(merchant: Merchant, **body: object) -> str:
    made = await merchant.post("/portal/v1/sessions", json=body)
    assert made.status_code == 201, made.text
    url = urlsplit(made.json()["url"])
    return f"{url.path}?{url.query}"


async def looks_right(page: Page) -> None:
    """axe-core finds nothing serious, and the page fits a phone's width."""
    assert await accessibility_problems(page) == []
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@ENGLISH
async def test_a_webhook_is_created_tested_rotated_and_deleted(
    shop: RunningService, context: BrowserContext, page: Page, receiver: Receiver
) -> None:
    await context.grant_permissions(["clipboard-read", "clipboard-write"])
    merchant = await shop.merchant()
    await page.goto(shop.base_url + await session_path(merchant))
    await page.get_by_role("link", name="Webhooks", exact=True).click()
    await page.get_by_role("link", name="Create webhook").click()
    await expect(page.get_by_role("heading", name="Create webhook", level=1)).to_be_visible()

    # A private address is refused beside its field, with what was typed kept.
    target = page.get_by_label("Target URL")
    await target.fill("https://10.20.30.40/webhooks")
    await page.get_by_label("Event type").select_option("PAYMENT_LINK_INBOUND")
    await expect(page.get_by_label("Active: deliver events to it")).to_be_checked()
    await page.get_by_role("button", name="Create webhook").click()
    await expect(target).to_have_attribute("aria-invalid", "true")
    await expect(target).to_have_accessible_description(
        "A public https address (in the sandbox, http will do too). This URL cannot receive "
        "webhooks: host 10.20.30.40 is not a public address; webhooks are only sent to public "
        "hosts (see TUCANO_WEBHOOK_ALLOWED_NETWORKS for local development)"
    )
    await expect(page.get_by_label("Event type")).to_have_value("PAYMENT_LINK_INBOUND")
    await looks_right(page)
    await snap(page, "portal-webhook-form")

    await target.fill(receiver.url("/portal/paid"))
    await page.get_by_role("button", name="Create webhook").click()
    await expect(page.get_by_role("status")).to_contain_text("Webhook created.")
    await expect(page.get_by_text(receiver.url("/portal/paid"))).to_be_visible()

    # The secret is shown on request only, and copied with a click.
    await expect(page.get_by_label("Current signing secret")).to_have_count(0)
    await page.get_by_role("button", name="Reveal secret").click()
    shown = page.get_by_label("Current signing secret")
    secret = await shown.input_value()
    assert secret.startswith("whsec_")
    await page.get_by_role("button", name="Copy").click()
    await expect(page.get_by_text("Secret copied.")).to_be_visible()
    assert await page.evaluate("navigator.clipboard.readText()") == secret
    await looks_right(page)
    await snap(page, "portal-webhook")

    await page.get_by_label("Variant").select_option("REFUNDED")
    await page.get_by_role("button", name="Send test event").click()
    await expect(page.get_by_role("status")).to_contain_text("Test event evt_")
    (first,) = await receiver.wait_for("/portal/paid", 1)
    payload = StandardWebhook(secret).verify(first.body, first.headers)
    assert (payload["status"], payload["refund"]["status"]) == ("REFUNDED", "SUCCEEDED")

    await page.get_by_role("link", name="Rotate secret").click()
    await expect(page.get_by_role("heading", name="Rotate the signing secret?")).to_be_visible()
    await expect(page.get_by_text("keeps signing beside it for 24 hours")).to_be_visible()
    await looks_right(page)
    await page.get_by_role("button", name="Rotate secret").click()
    await expect(page.get_by_role("status").first).to_contain_text(
        "the old one keeps signing deliveries beside it for 24 hours"
    )
    rotated = await page.get_by_label("Current signing secret").input_value()
    assert rotated.startswith("whsec_") and rotated != secret
    await page.get_by_role("button", name="Send test event").click()
    await expect(page.get_by_role("status")).to_contain_text("Test event evt_")
    _, second = await receiver.wait_for("/portal/paid", 2)
    # Signed with both for 24 hours: a receiver still holding the old secret keeps working.
    for either in (rotated, secret):
        StandardWebhook(either).verify(second.body, second.headers)

    await page.get_by_role("link", name="Delete webhook").click()
    await expect(page.get_by_role("heading", name="Delete this webhook?")).to_be_visible()
    await looks_right(page)
    await page.get_by_role("button", name="Delete webhook").click()
    await expect(page.get_by_role("status")).to_have_text("Webhook deleted.")
    await expect(page.get_by_text("No webhook registered yet.")).to_be_visible()
    assert (await merchant.get("/webhook/v1/list")).json()["totalElements"] == 0


@ENGLISH
async def test_a_read_only_session_has_no_webhook_action_and_is_refused_one(
    shop: RunningService, context: BrowserContext, page: Page
) -> None:
    merchant = await shop.merchant()
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://hooks.example.com/watched", "eventType": "PIX_QR_INBOUND"},
    )
    webhook_id = created.json()["webhookId"]
    await page.goto(shop.base_url + await session_path(merchant, readOnly=True))
    await page.get_by_role("link", name="Webhooks", exact=True).click()
    await expect(page.get_by_role("link", name="Create webhook")).to_have_count(0)
    await page.get_by_role("link", name="https://hooks.example.com/watched").click()
    await expect(page.get_by_role("heading", name=f"Webhook {webhook_id}")).to_be_visible()
    await expect(page.get_by_text("PIX_QR_INBOUND")).to_be_visible()
    main = page.get_by_role("main")
    await expect(main.get_by_role("button")).to_have_count(0)
    for name in ("Rotate secret", "Delete webhook"):
        await expect(main.get_by_role("link", name=name)).to_have_count(0)
    await looks_right(page)

    # The session's own forgery field (its sign-out form has one) does not make a form pass.
    token = await page.locator('input[name="csrf_token"]').first.input_value()
    for action in ("secret", "rotate", "test-event", "delete"):
        refused = await context.request.post(
            f"{shop.base_url}/portal/webhooks/{webhook_id}/{action}",
            form={"csrf_token": token},
        )
        assert refused.status == 403, action
    kept = await merchant.get(f"/webhook/v1/{webhook_id}")
    assert kept.status_code == 200
