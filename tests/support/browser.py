"""What the browser tests share: axe-core's check, the QR read back from the pixels."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import axe_playwright_python
import zxingcpp
from PIL import Image
from playwright.async_api import Locator, Page

# axe-core as the axe-playwright-python wheel ships it: no network, no npm.
AXE_SOURCE = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text("utf-8")
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

# Screenshots land in test-artifacts/ at the top of the checkout; every page is seen at two widths.
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


async def accessibility_problems(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of WCAG 2.1 A and AA on the page as it is.
    Evaluated by the test, so the page's CSP (no inline script) does not apply to it."""
    await page.evaluate(AXE_SOURCE)
    result = await page.evaluate(
        "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}, "
        "resultTypes: ['violations']})).violations.map(v => ({id: v.id, impact: v.impact, "
        "nodes: v.nodes.map(n => n.target.join(' '))}))",
        WCAG,
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


async def decoded_qr(element: Locator) -> list[str]:
    """The texts of the QR codes in the element's pixels, as a phone's camera would read them."""
    picture = Image.open(io.BytesIO(await element.screenshot()))
    return [found.text for found in zxingcpp.read_barcodes(picture)]


async def snap(page: Page, name: str) -> None:
    """Screenshots of the page as it is: on a phone (390 x 844) the screen the payer sees, no
    more (a full-page capture would show an alert the payer has to scroll to find); at 1280 px
    the whole page."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.set_viewport_size(PHONE)
    await page.screenshot(path=str(ARTIFACTS / f"{name}-390.png"), full_page=False)
    await page.set_viewport_size(DESKTOP)
    await page.screenshot(path=str(ARTIFACTS / f"{name}-1280.png"), full_page=True)
    await page.set_viewport_size(PHONE)
