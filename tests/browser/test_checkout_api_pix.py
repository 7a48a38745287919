"""The checkout with the `api-pix` Pix provider, in Chromium: the PSP's code, and a QR that a
bank app reads as exactly that code."""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import Page

from tests.support.api_pix import api_pix
from tests.support.browser import decoded_qr
from tests.support.payer import checkout_path
from tucano.db.database import Database
from tucano.migrations import upgrade


async def test_the_page_shows_the_psps_code_and_its_qr_decodes_to_it(
    page: Page, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'api-pix.db'}"
    await asyncio.to_thread(upgrade, url)
    database = Database(url)
    try:
        async with api_pix(database, tmp_path) as setup:
            link, charge = await setup.charged_link()
            await page.goto(setup.service.base_url + checkout_path(link))
            code = (await page.locator("[data-pix-code]").text_content() or "").strip()
            assert code == setup.psp.charges[charge.txid].pix_copia_e_cola
            assert await decoded_qr(page.locator("[data-qr] svg")) == [code]
            assert await page.locator("[data-simulate]").count() == 0
    finally:
        await database.dispose()
