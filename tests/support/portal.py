"""Helpers for portal tests: a session URL asked for through the API, and a browser-like client
(cookies kept, HTML preferred) that opens it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.support.service import Merchant

SESSIONS = "/portal/v1/sessions"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def session_url(merchant: Merchant, **body: Any) -> str:
    """A new session URL's path and query (the address is TUCANO_PUBLIC_URL's, not the test
    server's)."""
    response = await merchant.post(SESSIONS, json=body)
    assert response.status_code == 201, response.text
    url = urlsplit(response.json()["url"])
    return f"{url.path}?{url.query}"


def browser(merchant: Merchant, *, language: str = "pt-BR") -> httpx.AsyncClient:
    """A client that keeps cookies and asks for pages, as a browser does."""
    return httpx.AsyncClient(
        base_url=merchant.service.base_url,
        headers={"accept": "text/html,*/*;q=0.8", "accept-language": language},
        timeout=30,
    )


@asynccontextmanager
async def open_portal(
    merchant: Merchant, *, language: str = "pt-BR", **body: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """A browser in a new session of the merchant's portal."""
    async with browser(merchant, language=language) as client:
        started = await client.get(await session_url(merchant, **body))
        assert started.status_code == 303, started.text
        yield client


def csrf_token(page: httpx.Response) -> str:
    found = _CSRF.search(page.text)
    assert found, page.text
    return found.group(1)
