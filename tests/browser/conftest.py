"""Browser tests: Playwright for Python driving Debian's Chromium (never a browser Playwright
downloads), against a real Tucano with its delivery worker, on a SQLite database of its own.

Skipped where no Chromium is installed (a laptop without it), unless TUCANO_TEST_BROWSER names
one, as CI does: then a missing browser fails the run. Screenshots go to test-artifacts/."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, async_playwright

from tests.support.browser import PHONE
from tests.support.service import RunningService, start_service
from tests.support.settings import DELIVERY_SETTINGS, make_settings
from tucano.db.database import Database
from tucano.migrations import upgrade

CHROMIUM = os.environ.get("TUCANO_TEST_BROWSER") or shutil.which("chromium") or ""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

if not CHROMIUM or not Path(CHROMIUM).exists():
    if os.environ.get("TUCANO_TEST_BROWSER"):
        raise RuntimeError(f"TUCANO_TEST_BROWSER={CHROMIUM!r}: no such browser")
    pytestmark = pytest.mark.skip(reason="no Chromium (apt-get install chromium)")


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM:
        pytest.skip("no Chromium (apt-get install chromium, or set TUCANO_TEST_BROWSER)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


@pytest.fixture(scope="module")
async def shop(tmp_root: Path) -> AsyncIterator[RunningService]:
    """Tucano in sandbox, its worker delivering to loopback receivers."""
    url = f"sqlite+aiosqlite:///{tmp_root / 'browser.db'}"
    await asyncio.to_thread(upgrade, url)
    database = Database(url)
    running = await start_service(
        make_settings(url, **DELIVERY_SETTINGS), database, background=True
    )
    yield running
    await running.stop()
    await database.dispose()


@pytest.fixture
async def context(
    browser: Browser, request: pytest.FixtureRequest
) -> AsyncIterator[BrowserContext]:
    options: dict[str, Any] = getattr(request, "param", {})
    made = await browser.new_context(
        **({"viewport": PHONE, "locale": "pt-BR", "device_scale_factor": 1} | options)
    )
    yield made
    await made.close()


@pytest.fixture
async def page(context: BrowserContext) -> AsyncIterator[Page]:
    opened = await context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))

    def on_console(message: ConsoleMessage) -> None:
        # A page answered 402, 404 or 410 on purpose is "failed to load" too; an asset is not.
        expected = message.text.startswith("Failed to load resource") and (
            "/checkout/assets/" not in message.location.get("url", "")
        )
        if message.type == "error" and not expected:
            problems.append(message.text)

    opened.on("console", on_console)
    yield opened
    # A blocked asset, a CSP violation or a script error shows up here.
    assert problems == [], problems
