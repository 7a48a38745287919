"""The portal's event catalogue in a real browser (Debian's Chromium): the seven event types,
each schema and sample opened from its collapsed section; axe-core, no sideways scrolling at
390 px, screenshots at 390 and 1280 px."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.browser.test_portal import ENGLISH, no_sideways_scrolling, session_path
from tests.support.browser import DESKTOP, accessibility_problems, snap
from tests.support.service import RunningService
from tucano.events.types import EventType


@ENGLISH
async def test_the_event_types_with_their_schemas_and_samples(
    shop: RunningService, page: Page
) -> None:
    merchant = await shop.merchant()
    await page.goto(shop.base_url + await session_path(merchant))
    await page.get_by_role("link", name="Event types", exact=True).click()
    await expect(page.get_by_role("heading", name="Event types", level=1)).to_be_visible()
    await expect(page.get_by_role("heading", level=2).filter(has_text="_")).to_have_text(
        [event_type.value for event_type in EventType]
    )
    pix = page.locator("#PIX_OUTBOUND")
    schema = pix.locator("pre").first
    await expect(schema).to_be_hidden()
    await pix.get_by_text("JSON schema").click()
    await expect(schema).to_be_visible()
    await expect(schema).to_contain_text('"transferId"')
    link = page.locator("#PAYMENT_LINK_INBOUND")
    await link.get_by_text("Sample: REFUND_FAILED").click()
    await expect(link.locator("details[data-sample=REFUND_FAILED] pre")).to_contain_text('"FAILED"')
    assert await accessibility_problems(page) == []
    assert await no_sideways_scrolling(page)
    await snap(page, "portal-event-types")
    await page.set_viewport_size(DESKTOP)
    assert await accessibility_problems(page) == []
