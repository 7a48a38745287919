"""A payer in a plain HTTP client: opens a link's checkout and submits its forms as a browser
without JavaScript would (its own cookies, the forms' hidden fields)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import unescape
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.support.service import RunningService

BROWSER = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
APPROVED_VISA = "4242 4242 4242 4242"
DECLINED = "4000 0000 0000 0002"
INSUFFICIENT_FUNDS = "4000 0000 0000 9995"
PROCESSING_ERROR = "4000 0000 0000 0119"


def checkout_path(link: dict[str, Any]) -> str:
    """`urlPayment` on the server under test (its host is TUCANO_PUBLIC_URL's)."""
    parts = urlsplit(link["urlPayment"])
    return f"{parts.path}?{parts.query}"


def form_action(page: str, marker: str) -> str:
    """The action of the form carrying `marker` (data-card-form, data-simulate)."""
    match = re.search(r'<form method="post" action="([^"]+)"[^>]*' + marker, page)
    assert match is not None, f"no form {marker} on the page"
    return unescape(match.group(1))


def hidden_token(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match is not None, "no anti-forgery field on the page"
    return match.group(1)


def alert_of(page: str) -> str | None:
    match = re.search(r'role="alert"[^>]*>([^<]+)<', page)
    return unescape(match.group(1)) if match else None


def card_form(
    page: str,
    number: str = APPROVED_VISA,
    *,
    installments: int = 1,
    holder: str = "Maria da Silva",
    expiry: str = "12/39",
    security_code: str = "123",
) -> dict[str, str]:
    """The card form of `page`, filled in."""
    return {
        "csrf_token": hidden_token(page),
        "card_number": number,
        "card_holder": holder,
        "card_expiry": expiry,
        "card_security_code": security_code,
        "installments": str(installments),
    }


@dataclass
class Payer:
    service: RunningService
    link: dict[str, Any]
    headers: dict[str, str] = field(default_factory=lambda: dict(BROWSER))
    http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.AsyncClient(base_url=self.service.base_url, timeout=30)

    async def close(self) -> None:
        await self.http.aclose()

    async def open(self) -> httpx.Response:
        return await self.http.get(checkout_path(self.link), headers=self.headers)

    async def page(self) -> str:
        answer = await self.open()
        assert answer.status_code == 200, answer.text
        return answer.text

    async def pay_by_card(
        self,
        number: str = APPROVED_VISA,
        *,
        installments: int = 1,
        holder: str = "Maria da Silva",
        expiry: str = "12/39",
        security_code: str = "123",
        page: str | None = None,
        **extra: str,
    ) -> httpx.Response:
        """Fill the card form of `page` (the page as opened now if not given) and submit it."""
        page = page if page is not None else await self.page()
        fields = (
            card_form(
                page,
                number,
                installments=installments,
                holder=holder,
                expiry=expiry,
                security_code=security_code,
            )
            | extra
        )
        return await self.http.post(
            form_action(page, "data-card-form"), data=fields, headers=self.headers
        )

    async def simulate_pix(self) -> httpx.Response:
        page = await self.page()
        return await self.http.post(
            form_action(page, "data-simulate"),
            data={"csrf_token": hidden_token(page)},
            headers=self.headers,
        )
