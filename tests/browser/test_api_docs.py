"""The interactive API docs render in a browser that can reach nothing but Tucano (this
machine's browser has no internet): every script and style they need is served by Tucano."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.support.browser import snap
from tests.support.service import RunningService


async def test_swagger_ui_renders_the_document_offline(shop: RunningService, page: Page) -> None:
    loaded: list[str] = []
    page.on("request", lambda request: loaded.append(request.url))
    await page.goto(shop.base_url + "/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Tucano")
    await expect(page.get_by_text("Create a payment link (B1)").first).to_be_attached()
    assert all(url.startswith(shop.base_url) for url in loaded), loaded
    await snap(page, "api-docs")


async def test_redoc_renders_the_document_offline(shop: RunningService, page: Page) -> None:
    loaded: list[str] = []
    page.on("request", lambda request: loaded.append(request.url))
    await page.goto(shop.base_url + "/redoc")
    await expect(
        page.get_by_role("heading", name="Create a payment link (B1)").first
    ).to_be_visible(timeout=15_000)
    assert all(url.startswith(shop.base_url) or url.startswith("blob:") for url in loaded), loaded
