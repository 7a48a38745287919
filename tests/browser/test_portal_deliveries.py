"""The portal's deliveries in a real browser (Debian's Chromium), in English: a receiver that
answers 500, its failed attempts and answer on Deliveries, Redeliver from the event's page, then
the receiver fixed and Recover, counted and confirmed, with the receiver getting the events;
the health chart drawn; a read-only session offered no action and refused one; axe-core, no
sideways scrolling at 390 px, screenshots at 390 and 1280 px."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.browser.test_portal import ENGLISH, no_sideways_scrolling, session_path
from tests.support.browser import DESKTOP, PHONE, accessibility_problems, snap
from tests.support.deliveries import register, results_for
from tests.support.receivers import Receiver, always
from tests.support.service import Merchant, RunningService, start_service
from tests.support.settings import DELIVERY_SETTINGS, make_settings
from tucano.brazil.brasilia_time import BRASILIA
from tucano.db.database import Database
from tucano.migrations import upgrade


@pytest.fixture(scope="module")
async def shop(tmp_root: Path) -> AsyncIterator[RunningService]:
    """Tucano in sandbox delivering to loopback receivers, whose webhooks are not switched off
    for failing while a person takes a few seconds over each page."""
    url = f"sqlite+aiosqlite:///{tmp_root / 'browser-deliveries.db'}"
    await asyncio.to_thread(upgrade, url)
    database = Database(url)
    settings = make_settings(url, **{**DELIVERY_SETTINGS, "webhook_deactivate_after": "1h"})
    running = await start_service(settings, database, background=True)
    yield running
    await running.stop()
    await database.dispose()


async def send(merchant: Merchant, event_type: str = "PIX_OUTBOUND") -> str:
    sent = await merchant.post("/webhook/v1/test-events", json={"eventType": event_type})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["eventId"])


async def looks_right(page: Page, name: str) -> None:
    assert await accessibility_problems(page) == []
    assert await no_sideways_scrolling(page)
    await snap(page, name)
    await page.set_viewport_size(DESKTOP)
    assert await accessibility_problems(page) == []
    await page.set_viewport_size(PHONE)


@ENGLISH
async def test_a_failed_delivery_is_seen_redelivered_and_recovered(
    shop: RunningService, page: Page, receiver: Receiver
) -> None:
    merchant = await shop.merchant()
    receiver.behaviours["/shop"] = always(500, "receiver is down")
    webhook = await register(merchant, receiver, "/shop", "PIX_OUTBOUND")
    since = datetime.now(UTC) - timedelta(minutes=5)
    first, second = await send(merchant), await send(merchant)
    await results_for(merchant, 2, webhookId=webhook["webhookId"], status="EXHAUSTED")

    await page.goto(shop.base_url + await session_path(merchant))
    await page.get_by_role("link", name="Deliveries", exact=True).click()
    await expect(page.get_by_role("heading", name="Deliveries", level=1)).to_be_visible()
    await expect(
        page.get_by_role("img", name="Attempts per day, succeeded and failed")
    ).to_be_visible()
    await expect(page.get_by_text("Attempts: 6 · succeeded: 0 · failed: 6")).to_be_visible()
    table = page.get_by_role("table", name="Delivery attempts, newest first (6 in all)")
    failed = table.get_by_role("row").filter(has_text=first).filter(has_text="retries exhausted")
    await expect(failed).to_contain_text("500")
    await expect(failed).to_contain_text(receiver.url("/shop"))
    await looks_right(page, "portal-deliveries")

    await failed.get_by_role("link", name=first).click()
    await expect(page.get_by_role("heading", name="PIX_OUTBOUND event", level=1)).to_be_visible()
    await expect(page.get_by_text("receiver is down").first).to_be_visible()
    await expect(
        page.get_by_role("heading", name=f"Attempt 3 to {receiver.url('/shop')}")
    ).to_be_visible()
    receiver.behaviours["/shop"] = always(200)
    await page.get_by_role("button", name="Redeliver").click()
    await expect(page.get_by_role("status")).to_have_text("Event queued for delivery again.")
    await receiver.wait_for("/shop", 7)
    assert receiver.at("/shop")[-1].headers["webhook-id"] == first
    await looks_right(page, "portal-delivery-event")

    await results_for(merchant, 1, webhookId=webhook["webhookId"], status="SUCCESS")
    await page.get_by_role("link", name="Back to deliveries").click()
    await page.get_by_label("From", exact=True).fill(
        since.astimezone(BRASILIA).strftime("%Y-%m-%dT%H:%M")
    )
    await page.get_by_role("button", name="Recover", exact=True).click()
    # Only the event still failed: the redelivered one succeeded since.
    await expect(page.get_by_role("heading", name="Recover 1 event?")).to_be_visible()
    await looks_right(page, "portal-recover")
    await page.get_by_role("button", name="Recover 1 event").click()
    await expect(page.get_by_role("status")).to_have_text("1 event queued for delivery again.")
    await receiver.wait_for("/shop", 8)
    assert receiver.at("/shop")[-1].headers["webhook-id"] == second


@ENGLISH
async def test_a_read_only_session_is_offered_no_redelivery_or_recovery(
    shop: RunningService, page: Page, receiver: Receiver
) -> None:
    merchant = await shop.merchant()
    webhook = await register(merchant, receiver, "/read-only", "PIX_OUTBOUND")
    event_id = await send(merchant)
    await results_for(merchant, 1, webhookId=webhook["webhookId"])
    await page.goto(shop.base_url + await session_path(merchant, readOnly=True))
    await page.get_by_role("link", name="Deliveries", exact=True).click()
    await expect(page.get_by_text("Read-only session")).to_be_visible()
    main = page.get_by_role("main")
    await expect(main.get_by_role("button", name="Recover")).to_have_count(0)
    await main.get_by_role("link", name=event_id).click()
    await expect(page.get_by_role("heading", name="PIX_OUTBOUND event")).to_be_visible()
    await expect(main.get_by_role("button")).to_have_count(0)
    token = await page.locator('input[name="csrf_token"]').first.get_attribute("value")
    refused = await page.request.post(
        f"{shop.base_url}/portal/deliveries/events/{event_id}/redeliver",
        form={"csrf_token": token or "", "webhook": str(webhook["webhookId"])},
    )
    assert refused.status == 403
    assert len(receiver.at("/read-only")) == 1
