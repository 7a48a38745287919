"""The portal's session call and session URL: 201 with a one-time URL of the caller's own
customer; opened once, it sets an HttpOnly cookie and leads to the portal without the token in
the address; a used, expired or altered URL is a page saying so; signing out ends the session."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from tests.support.payment_links import create
from tests.support.portal import SESSIONS, browser, csrf_token, open_portal, session_url
from tests.support.service import RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.core.clock import clock, format_utc
from tucano.core.errors import ErrorCode


async def test_a_session_url_is_201_with_the_url_and_when_it_expires(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    with clock.freeze():
        response = await merchant.post(SESSIONS)
        longer = await merchant.post(SESSIONS, json={"expiresInSeconds": 86400, "locale": "en"})
        now = clock.now()
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"url", "expiresAt"}
    assert body["url"].startswith("http://127.0.0.1:8000/portal/start?token=")
    assert body["expiresAt"] == format_utc(now + timedelta(hours=1))
    assert response.headers["cache-control"] == "no-store"
    assert longer.status_code == 201, longer.text
    assert longer.json()["expiresAt"] == format_utc(now + timedelta(days=1))
    assert longer.json()["url"] != body["url"]


async def test_opening_a_session_needs_a_token_with_the_portal_session_scope(
    service: RunningService,
) -> None:
    without = await service.merchant(
        scopes=[Scope.WEBHOOK_READ, Scope.WEBHOOK_WRITE, Scope.PAYMENT_LINK_READ]
    )
    error = assert_error_body(await without.post(SESSIONS), 403, ErrorCode.INSUFFICIENT_SCOPE)
    assert error["errors"] == ["this operation needs the scope portal.session"]
    assert_error_body(await service.http.post(SESSIONS), 401, ErrorCode.UNAUTHENTICATED)
    only = await service.merchant(scopes=[Scope.PORTAL_SESSION])
    assert (await only.post(SESSIONS)).status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expiresInSeconds": 59}, "expiresInSeconds"),
        ({"expiresInSeconds": 86401}, "expiresInSeconds"),
        ({"expiresInSeconds": "3600"}, "expiresInSeconds"),
        ({"expiresInSeconds": 3600.5}, "expiresInSeconds"),
        ({"readOnly": "yes"}, "readOnly"),
        ({"readOnly": None}, "readOnly"),
        ({"locale": "fr"}, "locale"),
        ({"locale": "pt"}, "locale"),
    ],
)
async def test_a_bad_body_is_400_naming_its_field(
    service: RunningService, body: dict[str, object], field: str
) -> None:
    merchant = await service.merchant()
    error = assert_error_body(
        await merchant.post(SESSIONS, json=body), 400, ErrorCode.INVALID_PARAMETERS
    )
    assert any(line.startswith(field) for line in error["errors"]), error


async def test_a_body_that_is_not_json_is_refused(service: RunningService) -> None:
    merchant = await service.merchant()
    malformed = await merchant.post(
        SESSIONS, content=b"{", headers={"content-type": "application/json"}
    )
    assert_error_body(malformed, 400, ErrorCode.MALFORMED_BODY)
    as_form = await merchant.post(SESSIONS, data={"readOnly": "true"})
    assert_error_body(as_form, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    listed = await merchant.post(SESSIONS, json=[1])
    assert_error_body(listed, 400, ErrorCode.INVALID_PARAMETERS)


async def test_the_url_opens_the_callers_customer_whatever_the_body_says(
    service: RunningService,
) -> None:
    merchant, other = await service.merchant(), await service.merchant()
    await other.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://other.example.com/hook", "eventType": "PIX_OUTBOUND"},
    )
    async with open_portal(
        merchant, customerId=other.customer_id, customer_id=other.customer_id
    ) as client:
        page = await client.get("/portal/webhooks")
    assert page.status_code == 200
    assert f"Cliente {merchant.customer_id}" in page.text
    assert str(other.customer_id) not in page.text
    assert "other.example.com" not in page.text


async def test_the_url_opens_the_portal_once_and_leaves_no_token_in_the_address(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    start = await session_url(merchant)
    token = start.split("token=")[1]
    async with browser(merchant) as client:
        opened = await client.get(start)
        assert opened.status_code == 303
        assert opened.headers["location"] == "/portal"
        assert opened.headers["referrer-policy"] == "no-referrer"
        home = await client.get(opened.headers["location"])
        assert home.status_code == 200
        assert token not in home.text and token not in str(home.url)
        assert "<h1>Visão geral</h1>" in home.text

        again = await client.get(start)
    assert again.status_code == 410
    assert again.headers["content-type"].startswith("text/html")
    assert "Este endereço do portal já foi usado" in again.text
    assert "Traceback" not in again.text
    # A client that does not ask for a page gets the error body.
    assert_error_body(await service.http.get(start), 410, ErrorCode.PORTAL_LINK_USED)


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("", 401, ErrorCode.PORTAL_LINK_INVALID),
        ("?token=", 401, ErrorCode.PORTAL_LINK_INVALID),
        ("?token=" + "A" * 43, 401, ErrorCode.PORTAL_LINK_INVALID),
        ("?token=" + "%C3%A9" * 43, 401, ErrorCode.PORTAL_LINK_INVALID),
        ("?token=" + "A" * 5000, 401, ErrorCode.PORTAL_LINK_INVALID),
    ],
)
async def test_an_unknown_token_is_a_page_saying_so(
    service: RunningService, query: str, status: int, code: ErrorCode
) -> None:
    merchant = await service.merchant()
    async with browser(merchant, language="en-US,en;q=0.9") as client:
        page = await client.get("/portal/start" + query)
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
    assert "This portal address is not valid" in page.text
    assert "set-cookie" not in page.headers
    assert_error_body(await service.http.get("/portal/start" + query), status, code)


async def test_an_altered_token_or_one_given_twice_opens_nothing(service: RunningService) -> None:
    merchant = await service.merchant()
    start = await session_url(merchant)
    altered = start[:-1] + ("A" if start[-1] != "A" else "B")
    async with browser(merchant) as client:
        assert (await client.get(altered)).status_code == 401
        assert (await client.get(start + "&token=" + start.split("token=")[1])).status_code == 401
        # Neither used the real one up.
        assert (await client.get(start)).status_code == 303


async def test_a_url_left_unused_past_its_expiry_opens_nothing(service: RunningService) -> None:
    merchant = await service.merchant()
    with clock.freeze() as frozen:
        start = await session_url(merchant, expiresInSeconds=60)
        frozen.advance(timedelta(seconds=60))
        async with browser(merchant) as client:
            page = await client.get(start)
        answer = await service.http.get(start)
    assert page.status_code == 410
    assert "Este endereço do portal expirou" in page.text
    assert_error_body(answer, 410, ErrorCode.PORTAL_LINK_EXPIRED)


async def test_the_session_ends_when_its_url_would_have(service: RunningService) -> None:
    merchant = await service.merchant()
    with clock.freeze() as frozen:
        async with open_portal(merchant, expiresInSeconds=600) as client:
            frozen.advance(timedelta(seconds=599))
            assert (await client.get("/portal/webhooks")).status_code == 200
            frozen.advance(timedelta(seconds=1))
            ended = await client.get("/portal/webhooks")
    assert ended.status_code == 401
    assert "Sua sessão no portal terminou" in ended.text
    assert 'href="/portal"' not in ended.text.split("<main")[1]  # no way in but a new URL


async def test_the_session_cookie_is_http_only_lax_and_kept_to_the_portal(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    with clock.freeze():
        async with browser(merchant) as client:
            opened = await client.get(await session_url(merchant, expiresInSeconds=900))
    cookie = opened.headers["set-cookie"]
    name, _, attributes = cookie.partition(";")
    assert name.startswith("tucano_portal=")
    flags = {part.strip().lower() for part in attributes.split(";")}
    assert {"httponly", "path=/portal", "samesite=lax", "max-age=900"} <= flags
    assert "secure" not in flags  # TUCANO_PUBLIC_URL is plain http here


async def test_pages_without_a_session_say_to_open_a_new_url(service: RunningService) -> None:
    merchant = await service.merchant()
    async with browser(merchant) as client:
        for path in ("/portal", "/portal/webhooks", "/portal/reports"):
            page = await client.get(path)
            assert page.status_code == 401, path
            assert "abra um novo endereço de sessão" in page.text
        client.cookies.set("tucano_portal", "A" * 43, path="/portal")
        assert (await client.get("/portal")).status_code == 401
    assert_error_body(await service.http.get("/portal"), 401, ErrorCode.PORTAL_SESSION_ENDED)


async def test_the_portal_speaks_the_sessions_language_else_the_browsers(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, language="en") as english:
        assert "<h1>Overview</h1>" in (await english.get("/portal")).text
    async with open_portal(merchant, language="en", locale="pt-BR") as chosen:
        assert "<h1>Visão geral</h1>" in (await chosen.get("/portal")).text
    async with open_portal(merchant, locale="en") as portuguese_browser:
        page = await portuguese_browser.get("/portal/deliveries")
    assert '<html lang="en">' in page.text
    assert '<a href="/portal/deliveries" aria-current="page">Deliveries</a>' in page.text


async def test_signing_out_ends_the_session_even_a_read_only_one(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, readOnly=True) as client:
        kept = client.cookies["tucano_portal"]
        home = await client.get("/portal")
        left = await client.post("/portal/sign-out", data={"csrf_token": csrf_token(home)})
        assert left.status_code == 303
        assert left.headers["location"] == "/portal/signed-out"
        assert "max-age=0" in left.headers["set-cookie"].lower()
        assert "Você saiu do portal" in (await client.get("/portal/signed-out")).text
        assert (await client.get("/portal")).status_code == 401
        # The cookie, kept by a browser that ignored its deletion, opens nothing either.
        client.cookies.set("tucano_portal", kept, path="/portal")
        assert (await client.get("/portal")).status_code == 401


async def test_the_home_page_counts_the_customers_webhooks_and_todays_links(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    for n in range(2):
        await merchant.post(
            "/webhook/v1/create",
            json={"targetUrl": f"https://hooks.example.com/{n}", "eventType": "PIX_OUTBOUND"},
        )
    async with open_portal(merchant) as client:
        home = await client.get("/portal")
    assert '<a href="/portal/webhooks">2</a>' in home.text
    assert "R$ 0,00" in home.text
    await create(merchant, amount=Decimal("1234.50"))
    await create(merchant, amount=Decimal("0.50"))
    await create(await service.merchant(), amount=Decimal("99.00"))  # another customer's
    async with open_portal(merchant) as client:
        home = await client.get("/portal")
    tiles = home.text.split('<dl class="tiles">')[1].split("</dl>")[0]
    assert "<dd>2</dd>" in tiles
    assert "R$ 1.235,00" in tiles
