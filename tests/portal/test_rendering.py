"""What every answer under /portal carries: a CSP with no inline script or style whose
frame-ancestors is TUCANO_PORTAL_FRAME_ANCESTORS ('none' by default), no Referer, no cache; and
the session cookie a framed portal needs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.portal import browser, session_url
from tests.support.service import RunningService, serving
from tests.support.settings import make_settings
from tucano.db.database import Database
from tucano.portal.rendering import ASSET_URLS

FRAMED_BY = "https://dash.example.com https://*.shop.example.org:8443"


@pytest.fixture
async def framed(database_url: str, database: Database) -> AsyncIterator[RunningService]:
    """Tucano on https, its portal framed by two dashboards' origins."""
    settings = make_settings(
        database_url, public_url="https://pay.example.com", portal_frame_ancestors=FRAMED_BY
    )
    async with serving(settings, database) as running:
        yield running


def directives(policy: str) -> dict[str, str]:
    return {
        name: value.strip()
        for name, _, value in (part.strip().partition(" ") for part in policy.split(";"))
    }


async def test_pages_load_only_tucanos_own_files_and_no_one_frames_them(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with browser(merchant) as client:
        answers = [
            await client.get(await session_url(merchant)),  # the redirect setting the cookie
            await client.get("/portal"),
            await client.get("/portal/start?token=nope"),  # an error page
            await client.get("/portal/nowhere"),  # the framework's 404
            await client.put("/portal"),  # the framework's 405
        ]
    for answer in answers:
        policy = directives(answer.headers["content-security-policy"])
        assert policy["frame-ancestors"] == "'none'", answer.url
        assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
        assert policy["default-src"] == "'none'"
        assert "unsafe-inline" not in answer.headers["content-security-policy"]
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "strict-transport-security" not in answer.headers  # plain http here
    assert answers[1].headers["cache-control"] == "no-store"
    assert [answer.status_code for answer in answers] == [303, 200, 401, 404, 405]


async def test_the_pages_have_no_inline_script_or_style_and_their_files_are_served(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with browser(merchant) as client:
        await client.get(await session_url(merchant))
        page = (await client.get("/portal/webhooks")).text
        css = await client.get(ASSET_URLS["css"])
        js = await client.get(ASSET_URLS["js"])
        missing = await client.get("/portal/static/evil.js")
    assert "<style" not in page and " style=" not in page
    assert "<script>" not in page and " on" + "click=" not in page
    assert f'<link rel="stylesheet" href="{ASSET_URLS["css"]}">' in page
    assert f'<script src="{ASSET_URLS["js"]}" defer></script>' in page
    assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert css.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert missing.status_code == 404
    # Nothing from elsewhere: no absolute URL in the page or its files.
    for text in (page, css.text, js.text):
        assert "http://" not in text and "https://" not in text


async def test_the_origins_configured_may_frame_the_portal_with_a_cross_site_cookie(
    framed: RunningService,
) -> None:
    merchant = await framed.merchant()
    async with browser(merchant) as client:
        opened = await client.get(await session_url(merchant))
        page = await client.get("/portal/start?token=nope")
    for answer in (opened, page):
        policy = directives(answer.headers["content-security-policy"])
        assert policy["frame-ancestors"] == FRAMED_BY
        assert "x-frame-options" not in answer.headers
        assert answer.headers["strict-transport-security"] == "max-age=31536000"
    name, _, attributes = opened.headers["set-cookie"].partition(";")
    # A name browsers take only with Secure, from a secure page.
    assert name.startswith("__Secure-tucano_portal=")
    flags = {part.strip().lower() for part in attributes.split(";")}
    assert {"httponly", "secure", "samesite=none", "partitioned", "path=/portal"} <= flags


async def test_on_https_without_framing_the_cookie_is_secure_and_lax(
    database_url: str, database: Database
) -> None:
    settings = make_settings(database_url, public_url="https://pay.example.com")
    async with serving(settings, database) as running:
        merchant = await running.merchant()
        async with browser(merchant) as client:
            opened = await client.get(await session_url(merchant))
    flags = {part.strip().lower() for part in opened.headers["set-cookie"].split(";")[1:]}
    assert {"httponly", "secure", "samesite=lax"} <= flags
    assert "partitioned" not in flags
    assert directives(opened.headers["content-security-policy"])["frame-ancestors"] == "'none'"
