"""The checkout page that `urlPayment` opens, over HTTP on each database: it shows the link to
its payer, and an altered, foreign or expired token opens nothing."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.payment_links import create, pay
from tests.support.service import Merchant, RunningService, assert_error_body, start_service
from tests.support.settings import TEST_SECRET_KEY, make_settings
from tucano.checkout.rendering import brl
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX

BROWSER = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


def checkout_path(link: dict[str, Any]) -> str:
    """`urlPayment` on the server under test (its host is TUCANO_PUBLIC_URL's)."""
    parts = urlsplit(link["urlPayment"])
    return f"{parts.path}?{parts.query}"


async def open_page(service: RunningService, path: str, **headers: str) -> httpx.Response:
    return await service.http.get(path, headers=headers)  # the payer sends no access token


async def test_the_checkout_shows_the_link_to_its_payer(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(
        merchant,
        payerName="Joana <b>& Filhos</b>",
        amount=Decimal("1234.50"),
        numbersInstallments=3,
        description="Pedido 42",
    )
    page = await open_page(service, checkout_path(link), **BROWSER)
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    text = page.text
    assert html.escape("Joana <b>& Filhos</b>") in text and "<b>&" not in text
    assert "R$ 1.234,50" in text and "Pedido 42" in text
    assert f">{link['verificationToken']}<" in text
    # The options offered are the link's installmentsOptions.
    for option in link["installmentsOptions"]:
        each = brl(Decimal(str(option["amountInstallment"])))
        assert f"{option['numberInstallments']}x de {each}" in text
    assert "3x de R$ 411,50" in text
    assert 'data-status="CREATED"' in text
    # The token is in the address: nothing may carry it away, cache it or frame the page.
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "strict-transport-security" not in page.headers  # TUCANO_PUBLIC_URL is http here
    assert "onfirme o código antes de pagar" in text


async def test_the_page_loads_nothing_inline_and_nothing_from_elsewhere(
    service: RunningService, merchant: Merchant
) -> None:
    page = await open_page(service, checkout_path(await create(merchant)), **BROWSER)
    policy = page.headers["content-security-policy"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == directives["style-src"] == "'self'"
    assert directives["form-action"] == "'self'" and directives["frame-ancestors"] == "'none'"
    text = page.text
    assert "<style" not in text and " style=" not in text
    assert not re.search(r"<script(?![^>]*\bsrc=)", text)  # every script is a file
    assert not re.search(r"\bon[a-z]+=", text)  # no inline handlers
    assets = re.findall(r'(?:href|src)="(/checkout/assets/[^"]+)"', text)
    assert len(assets) == 2
    assert not re.search(r'(?:href|src)="(?:https?:)?//', text)  # no third-party asset or font
    for asset, kind in zip(sorted(assets), ["text/css", "text/javascript"], strict=True):
        answer = await service.http.get(asset)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "immutable" in answer.headers["cache-control"]
    assert (await service.http.get("/checkout/assets/nope.js")).status_code == 404


@pytest.mark.parametrize(
    ("how", "status"),
    [
        ("options", 405),
        ("unknown path", 404),
        ("nul in the query", 400),
        ("body too large", 413),
        ("compressed body", 415),
        ("status, altered token", 404),
        ("asset", 200),
    ],
)
async def test_every_answer_under_checkout_carries_the_pages_headers(
    service: RunningService, merchant: Merchant, how: str, status: int
) -> None:
    path = checkout_path(await create(merchant))
    base = path.split("?")[0]
    http = service.http
    answer = {
        "options": lambda: http.request("OPTIONS", path),
        "unknown path": lambda: http.get(base + "/nope"),
        "nul in the query": lambda: http.get(path + "%00"),
        "body too large": lambda: http.post(
            path.replace("?", "/card?"), content=b"x" * (2 * 1024 * 1024)
        ),
        "compressed body": lambda: http.post(
            path.replace("?", "/card?"), content=b"x", headers={"content-encoding": "gzip"}
        ),
        "status, altered token": lambda: http.get(path.replace("?", "/status?") + "xx"),
        "asset": lambda: http.get("/checkout/assets/checkout.css"),
    }[how]
    response = await answer()
    assert response.status_code == status
    assert response.headers["content-security-policy"].startswith("default-src 'none'")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"


async def test_a_forms_address_opened_again_is_the_page(
    service: RunningService, merchant: Merchant
) -> None:
    # A refused card's page has the form's address: reloaded or restored, it is the checkout.
    path = checkout_path(await create(merchant))
    for form in ("/card", "/pix/simulate"):
        answer = await open_page(service, path.replace("?", form + "?"), **BROWSER)
        assert answer.status_code == 303 and answer.headers["location"] == path


@pytest.mark.parametrize(
    ("accept_language", "says"),
    [
        ("", "Pagar com cartão de crédito"),
        ("pt-BR,pt;q=0.9,en;q=0.8", "Pagar com cartão de crédito"),
        ("en-US,en;q=0.9,pt-BR;q=0.8", "Pay by credit card"),
        ("en", "Pay by credit card"),
        ("fr-FR,fr;q=0.9", "Pagar com cartão de crédito"),
        ("fr,en;q=0.5", "Pay by credit card"),
        ("en;q=0.4,pt;q=0.6", "Pagar com cartão de crédito"),
    ],
)
async def test_the_page_is_in_portuguese_unless_the_browser_prefers_english(
    service: RunningService, merchant: Merchant, accept_language: str, says: str
) -> None:
    link = await create(merchant, amount=Decimal("1234.50"), numbersInstallments=2)
    page = await open_page(
        service, checkout_path(link), **BROWSER, **{"accept-language": accept_language}
    )
    assert says in page.text
    english = says.startswith("Pay")
    assert f'<html lang="{"en" if english else "pt-BR"}">' in page.text
    assert ("R$ 1,234.50" if english else "R$ 1.234,50") in page.text
    assert ("2x of R$ 617.25" if english else "2x de R$ 617,25") in page.text
    assert "Accept-Language" in page.headers["vary"]


async def test_behind_https_the_page_asks_for_https_only(
    database_url: str, database: Database
) -> None:
    running = await start_service(
        make_settings(database_url, public_url="https://pay.example.com"), database
    )
    try:
        page = await open_page(running, checkout_path(await create(await running.merchant())))
        assert page.headers["strict-transport-security"].startswith("max-age=")
        assert "secure" in page.headers["set-cookie"].lower()
    finally:
        await running.stop()


async def test_the_checkout_offers_no_instalment_under_a_cent(
    service: RunningService, merchant: Merchant
) -> None:
    # (Fuzz audit: "3x de R$ 0,00" was offered for a link of R$ 0,01.)
    link = await create(merchant, amount=Decimal("0.03"), numbersInstallments=10)
    # The API's options stay one per count, amount / n half-up, as the spec says.
    assert len(link["installmentsOptions"]) == 10
    assert link["installmentsOptions"][2] == {"numberInstallments": 3, "amountInstallment": 0.01}
    text = (await open_page(service, checkout_path(link), **BROWSER)).text
    offered = re.findall(r'<option value="(\d+)"[^>]*>([^<]*)</option>', text)
    assert offered == [
        ("1", "1x de R$ 0,03"),
        ("2", "2x: 1ª de R$ 0,02 e 1x de R$ 0,01"),
        ("3", "3x de R$ 0,01"),
    ]


async def test_each_option_says_the_instalments_as_they_will_be_charged(
    service: RunningService, merchant: Merchant
) -> None:
    # (Issue 36: R$ 99,90 offered "4x de R$ 24,98" and charged 24,99 + 3 x 24,97.)
    link = await create(merchant, amount=Decimal("99.90"), numbersInstallments=4)
    assert link["installmentsOptions"][3]["amountInstallment"] == 24.98  # amount / n, half-up
    text = (await open_page(service, checkout_path(link), **BROWSER)).text
    offered = re.findall(r'<option value="\d+"[^>]*>([^<]*)</option>', text)
    assert offered == [
        "1x de R$ 99,90",
        "2x de R$ 49,95",
        "3x de R$ 33,30",
        "4x: 1ª de R$ 24,99 e 3x de R$ 24,97",
    ]
    assert "os centavos que sobram vão na 1ª parcela" in text
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=4)
    receipt = (await open_page(service, checkout_path(link), **BROWSER)).text
    assert (
        '<span class="money">R$ 24,99</span> e 3x de <span class="money">R$ 24,97</span>' in receipt
    )


@pytest.mark.parametrize(
    ("method", "installments", "shown"),
    [
        (METHOD_CARD, 3, "3x: 1ª de R$ 33,34 e 2x de R$ 33,33"),
        (METHOD_PIX, 1, "data-payment-method>Pix<"),
    ],
)
async def test_a_paid_link_shows_its_payment_and_no_more_options(
    service: RunningService, merchant: Merchant, method: int, installments: int, shown: str
) -> None:
    link = await create(merchant, amount=Decimal("100.00"), numbersInstallments=3)
    await pay(service, merchant, link["linkPaymentUuid"], method, installments=installments)
    page = await open_page(service, checkout_path(link))
    assert page.status_code == 200
    assert 'data-status="PAID"' in page.text
    # Amounts sit in spans that keep "R$" with its figure.
    text = re.sub(r'<span class="money">([^<]*)</span>', r"\1", page.text)
    assert shown in text and "R$ 100,00" in text
    assert "Pagamento aprovado" in page.text and "<form" not in page.text
    assert "onfirme o código antes de pagar" not in page.text


@pytest.mark.parametrize(
    "how",
    [
        "altered",
        "another link's",
        "missing",
        "not a UUID",
        "too long",
        "twice",
        "twice, valid first",
    ],
)
async def test_a_token_that_is_not_this_links_opens_nothing(
    service: RunningService, merchant: Merchant, how: str
) -> None:
    link, other = await create(merchant), await create(merchant)
    path = checkout_path(link)
    uuid = link["linkPaymentUuid"]
    token = path.partition("token=")[2]
    wrong = {
        "altered": path[:-2] + ("AA" if not path.endswith("AA") else "BB"),
        "another link's": f"/checkout/{uuid}?{urlsplit(other['urlPayment']).query}",
        "missing": f"/checkout/{uuid}",
        "not a UUID": f"/checkout/{uuid[:-1]}?token={token}",
        "too long": f"/checkout/{uuid}?token={token}{'A' * 5000}",
        # Of two tokens, which would count? Neither (found by the fuzz audit).
        "twice": f"/checkout/{uuid}?token=x&token={token}",
        "twice, valid first": f"/checkout/{uuid}?token={token}&token={token}",
    }[how]
    answer = await open_page(service, wrong)
    body = assert_error_body(answer, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)
    # One answer whatever is wrong, naming nothing of this link or another.
    assert body["errors"] == [
        "this checkout address is not valid: its token is missing, altered or another link's"
    ]
    assert (
        answer.headers["cache-control"] == "no-store"
        and answer.headers["vary"] == "Accept, Accept-Language"
    )

    page = await open_page(service, wrong, **BROWSER)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "não encontrado" in page.text and link["payerName"] not in page.text


async def test_a_paid_link_still_shows_its_payment_after_its_expiration_date(
    service: RunningService,
) -> None:
    # A paid link never expires: the payer who comes back to check sees it paid, not a page
    # telling them to ask for a new link (and perhaps pay twice).
    with clock.freeze(datetime(2030, 5, 1, 12, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, expirationDays=1)
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
        frozen.advance(timedelta(days=3))
        page = await open_page(service, checkout_path(link), **BROWSER)
    assert page.status_code == 200 and 'data-status="PAID"' in page.text


async def test_an_expired_link_opens_nothing(service: RunningService) -> None:
    with clock.freeze(datetime(2030, 5, 1, 12, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, expirationDays=1)
        frozen.advance(timedelta(days=1) - timedelta(milliseconds=1))
        assert (await open_page(service, checkout_path(link))).status_code == 200
        frozen.advance(timedelta(milliseconds=1))
        assert_error_body(
            await open_page(service, checkout_path(link)), 410, ErrorCode.PAYMENT_LINK_EXPIRED
        )
        frozen.advance(timedelta(seconds=2))  # past the token's own expiry too
        page = await open_page(service, checkout_path(link), **BROWSER)
        assert page.status_code == 410 and "expirou" in page.text


async def test_links_payers_hold_still_open_after_the_secret_key_changes_if_it_is_kept_as_previous(
    service: RunningService, merchant: Merchant, database_url: str
) -> None:
    """Changing TUCANO_SECRET_KEY voids every access token (operations.md says to, after a
    leak); the old key in TUCANO_PREVIOUS_SECRET_KEYS keeps the urlPayment already sent to
    payers working, and nothing else it signed."""
    link = await create(merchant)
    for previous, opens in (([TEST_SECRET_KEY], 200), ([], 404)):
        database = Database(database_url)
        changed = await start_service(
            make_settings(database_url, secret_key="n" * 40, previous_secret_keys=previous),
            database,
        )
        try:
            page = await open_page(changed, checkout_path(link), **BROWSER)
            assert page.status_code == opens, previous
            old_token = await merchant.get("/webhook/v1/list")
            assert old_token.status_code == 200  # on the service still using the old key
            merchant.service = changed
            try:
                assert (await merchant.get("/webhook/v1/list")).status_code == 401
            finally:
                merchant.service = service
            # Links signed with the new key open as before.
            new_link = await create(await changed.merchant())
            assert (await open_page(changed, checkout_path(new_link))).status_code == 200
        finally:
            await changed.stop()
            await database.dispose()
