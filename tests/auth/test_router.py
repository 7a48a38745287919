"""POST /oauth/v1/token (RFC 6749 4.4 and 5.2) and the bearer-token rules of decisions.md."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx
import jwt
import pytest

from tests.support.service import NoDatabase, RunningService, assert_error_body, serving
from tests.support.settings import TEST_SECRET_KEY, make_settings, redis_settings
from tucano.auth.tokens import Principal, Scope, derive_key, encode_access_token
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.db.database import Database

TOKEN = "/oauth/v1/token"


def basic(client_id: str, secret: str) -> dict[str, str]:
    raw = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


async def test_form_credentials_give_a_bearer_token(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN,
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "scope"}
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"].split() == sorted(
        [
            "webhook.read",
            "webhook.write",
            "payment-link.read",
            "payment-link.write",
            "portal.session",
        ]
    )
    listed = await service.http.get(
        "/webhook/v1/list", headers={"Authorization": f"Bearer {body['access_token']}"}
    )
    assert listed.status_code == 200


async def test_http_basic_client_authentication_works(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN, data={"grant_type": "client_credentials"}, headers=basic(client_id, secret)
    )
    assert response.status_code == 200, response.text


async def test_the_token_carries_customer_partner_and_scopes(service: RunningService) -> None:
    client_id, secret, customer_id = await service.client_credentials(partner_id=31)
    body = (
        await service.http.post(
            TOKEN, data={"grant_type": "client_credentials"}, headers=basic(client_id, secret)
        )
    ).json()
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["cid"] == customer_id
    assert claims["pid"] == 31
    assert claims["sub"] == client_id
    assert claims["exp"] - claims["iat"] == 3600


@pytest.mark.parametrize("secret_change", ["wrong", "", "append"])
async def test_a_wrong_secret_is_invalid_client_401(
    service: RunningService, secret_change: str
) -> None:
    client_id, secret, _ = await service.client_credentials()
    bad = {"wrong": "tsk_wrong", "": "x", "append": secret + "x"}[secret_change]
    response = await service.http.post(
        TOKEN,
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": bad},
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert "www-authenticate" in response.headers


async def test_an_unknown_client_is_invalid_client_401(service: RunningService) -> None:
    response = await service.http.post(
        TOKEN,
        data={"grant_type": "client_credentials", "client_id": "tci_nope", "client_secret": "x"},
    )
    assert response.status_code == 401
    assert response.json() == {
        "error": "invalid_client",
        "error_description": "unknown client or wrong client secret",
    }


async def test_wrong_basic_credentials_are_401(service: RunningService) -> None:
    client_id, _, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN, data={"grant_type": "client_credentials"}, headers=basic(client_id, "nope")
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    garbled = await service.http.post(
        TOKEN, data={"grant_type": "client_credentials"}, headers={"Authorization": "Basic %%%"}
    )
    assert garbled.status_code == 401


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({}, "invalid_request"),
        ({"grant_type": "password", "username": "a", "password": "b"}, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "code": "x"}, "unsupported_grant_type"),
    ],
)
async def test_bad_requests_get_rfc6749_errors(
    service: RunningService, form: dict[str, str], error: str
) -> None:
    response = await service.http.post(TOKEN, data=form)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == error
    assert body["error_description"]


@pytest.mark.parametrize(
    "form",
    [
        {"grant_type": "client_credentials"},
        {"grant_type": "client_credentials", "client_id": "tci_x"},
        {"grant_type": "client_credentials", "client_secret": "tcs_x"},
        {"grant_type": "client_credentials", "client_id": "", "client_secret": ""},
    ],
)
async def test_no_client_authentication_is_invalid_client(
    service: RunningService, form: dict[str, str]
) -> None:
    # RFC 6749 5.2: "no client authentication included" is invalid_client, a 401.
    response = await service.http.post(TOKEN, data=form)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert response.headers["WWW-Authenticate"].startswith("Basic")


async def test_a_nul_in_the_credentials_is_invalid_client(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    for form in (
        {"grant_type": "client_credentials", "client_id": "tci_\x00x", "client_secret": secret},
        {"grant_type": "client_credentials", "client_id": client_id, "client_secret": "x\x00"},
    ):
        response = await service.http.post(TOKEN, data=form)
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "invalid_client"
    response = await service.http.post(
        TOKEN, data={"grant_type": "client_credentials"}, headers=basic("a\x00b", "x")
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


async def test_a_client_gone_mid_body_is_no_server_error(
    service: RunningService, capsys: pytest.CaptureFixture[str]
) -> None:
    host, port = service.base_url.removeprefix("http://").split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /oauth/v1/token HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
        b"grant_type=client_cre"
    )
    await writer.drain()
    writer.close()  # before the rest of the body
    await asyncio.sleep(0.3)
    logged = capsys.readouterr().out
    assert "unhandled_error" not in logged
    (line,) = [line for line in logged.splitlines() if "path=/oauth/v1/token" in line]
    assert "status=400" in line


async def test_a_json_body_is_invalid_request(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN,
        json={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


async def test_a_repeated_parameter_is_invalid_request(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    body = (
        f"grant_type=client_credentials&client_id={client_id}"
        f"&client_secret={secret}&client_secret=x"
    )
    response = await service.http.post(
        TOKEN, content=body, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


async def test_a_body_with_a_content_encoding_is_invalid_request(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    body = f"grant_type=client_credentials&client_id={client_id}&client_secret={secret}"
    response = await service.http.post(
        TOKEN,
        content=body,
        headers={
            "content-type": "application/x-www-form-urlencoded",
            "content-encoding": "gzip",
        },
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "Content-Encoding gzip is not supported: send the body as is",
    }


async def test_parameters_it_does_not_know_are_ignored_even_repeated(
    service: RunningService,
) -> None:
    # RFC 6749 3.2: "The authorization server MUST ignore unrecognized request parameters."
    client_id, secret, _ = await service.client_credentials()
    body = (
        f"grant_type=client_credentials&client_id={client_id}&client_secret={secret}"
        "&foo=1&foo=2&audience=x"
    )
    response = await service.http.post(
        TOKEN, content=body, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 200, response.text


async def test_a_nul_in_the_query_is_an_oauth_error(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN + "?x=%00",
        data={"grant_type": "client_credentials"},
        headers=basic(client_id, secret),
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "query parameters must not contain NUL (%00)",
    }


async def test_a_subset_of_scopes_can_be_asked_for(service: RunningService) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN,
        data={"grant_type": "client_credentials", "scope": "webhook.read"},
        headers=basic(client_id, secret),
    )
    assert response.json()["scope"] == "webhook.read"
    token = response.json()["access_token"]
    create = await service.http.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert_error_body(create, 403, ErrorCode.INSUFFICIENT_SCOPE)


@pytest.mark.parametrize("scope", ["events.publish", "admin", "webhook.read bogus"])
async def test_a_scope_not_granted_is_invalid_scope(service: RunningService, scope: str) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN,
        data={"grant_type": "client_credentials", "scope": scope},
        headers=basic(client_id, secret),
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_scope"


async def test_an_unknown_scope_is_not_repeated_if_it_is_a_card_number(
    service: RunningService,
) -> None:
    client_id, secret, _ = await service.client_credentials()
    response = await service.http.post(
        TOKEN,
        data={"grant_type": "client_credentials", "scope": "4111111111111111"},
        headers=basic(client_id, secret),
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_scope"
    assert "4111111111111111" not in response.text


# --- bearer tokens on the API ------------------------------------------------------------------


def _key() -> bytes:
    return derive_key(TEST_SECRET_KEY.encode(), "access-token")


def _principal(customer_id: int = 1) -> Principal:
    return Principal("tci_x", customer_id, None, frozenset(s.value for s in Scope))


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Token abc",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-jwt",
        "Bearer a.b.c",
        "Bearer two tokens",
    ],
)
async def test_missing_or_malformed_tokens_are_401(
    service: RunningService, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await service.http.get("/webhook/v1/list", headers=headers)
    assert_error_body(response, 401, ErrorCode.UNAUTHENTICATED)


async def test_a_token_signed_with_another_key_is_401(service: RunningService) -> None:
    forged = encode_access_token(
        _principal(),
        key=derive_key(b"another-secret-key-" * 3, "access-token"),
        now=clock.now(),
        ttl=timedelta(hours=1),
    )
    response = await service.http.get(
        "/webhook/v1/list", headers={"Authorization": f"Bearer {forged}"}
    )
    assert_error_body(response, 401, ErrorCode.UNAUTHENTICATED)


async def test_a_token_with_alg_none_or_altered_claims_is_401(service: RunningService) -> None:
    unsigned = jwt.encode(
        {"iss": "tucano", "aud": "tucano-api", "sub": "x", "cid": 1, "iat": 1, "exp": 2**40},
        key="",
        algorithm="none",
    )
    response = await service.http.get(
        "/webhook/v1/list", headers={"Authorization": f"Bearer {unsigned}"}
    )
    assert_error_body(response, 401)

    genuine = encode_access_token(
        _principal(5), key=_key(), now=clock.now(), ttl=timedelta(hours=1)
    )
    header, _payload, signature = genuine.split(".")
    claims = jwt.decode(genuine, options={"verify_signature": False})
    claims["cid"] = 6
    altered_payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=")
    altered = f"{header}.{altered_payload.decode()}.{signature}"
    response = await service.http.get(
        "/webhook/v1/list", headers={"Authorization": f"Bearer {altered}"}
    )
    assert_error_body(response, 401)


async def test_an_expired_token_is_401(service: RunningService) -> None:
    with clock.freeze(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)) as frozen:
        token = await service.token()
        headers = {"Authorization": f"Bearer {token}"}
        assert (await service.http.get("/webhook/v1/list", headers=headers)).status_code == 200
        frozen.advance(timedelta(seconds=3599))
        assert (await service.http.get("/webhook/v1/list", headers=headers)).status_code == 200
        frozen.advance(timedelta(seconds=2))
        response = await service.http.get("/webhook/v1/list", headers=headers)
        error = assert_error_body(response, 401, ErrorCode.UNAUTHENTICATED)
        assert "expired" in error["errors"][0]


async def test_a_token_from_another_instance_secret_does_not_pass(
    service: RunningService,
) -> None:
    old = encode_access_token(
        _principal(), key=derive_key(b"x" * 40, "checkout"), now=clock.now(), ttl=timedelta(hours=1)
    )
    response = await service.http.get(
        "/webhook/v1/list", headers={"Authorization": f"Bearer {old}"}
    )
    assert_error_body(response, 401)


async def test_another_method_is_an_rfc6749_error_naming_post(service: RunningService) -> None:
    """A client of the token endpoint parses its errors the OAuth way, whatever went wrong."""
    for method in ("GET", "PUT", "DELETE"):
        response = await service.http.request(method, TOKEN)
        assert response.status_code == 405, method
        assert response.json() == {
            "error": "invalid_request",
            "error_description": f"{method} is not allowed on {TOKEN}",
        }
        assert response.headers["allow"] == "POST"
        assert response.headers["cache-control"] == "no-store"
    # A path under /oauth/ that is no route is a 404 like any other.
    assert_error_body(await service.http.get("/oauth/v1/nothing"), 404, ErrorCode.ROUTE_NOT_FOUND)


# --- rate limits (TUCANO_TOKEN_RATE_LIMIT, per client_id and per source address) ---------------


def wrong_secret(client_id: str) -> dict[str, str]:
    return {"grant_type": "client_credentials", "client_id": client_id, "client_secret": "nope"}


def from_address(host: str) -> dict[str, str]:
    # The test server, like `tucano serve`, takes the address a proxy on 127.0.0.1 names.
    return {"X-Forwarded-For": host}


def assert_too_many_token_requests(response: httpx.Response) -> None:
    """A 429 in RFC 6749's shape, as the endpoint's other errors, with a Retry-After."""
    assert response.status_code == 429, response.text
    body = response.json()
    assert set(body) == {"error", "error_description"}
    assert body["error"] == "invalid_request"
    assert body["error_description"].startswith("too many token requests")
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers["cache-control"] == "no-store"


async def test_500_wrong_secrets_in_a_row_meet_a_429_well_before_the_end(
    database_url: str, database: Database
) -> None:
    # A minute's budget: at 10/second a slot freed by the sliding window as the test runs would
    # go to whichever request came next, the right secret's included.
    settings = make_settings(database_url, token_rate_limit="10/minute")
    async with serving(settings, database) as service:
        client_id, secret, _ = await service.client_credentials()
        statuses = []
        for _ in range(500):
            response = await service.http.post(TOKEN, data=wrong_secret(client_id))
            statuses.append(response.status_code)
            if response.status_code == 429:
                assert_too_many_token_requests(response)
        assert set(statuses) == {401, 429}
        assert statuses.index(429) <= 12, statuses[:20]
        assert statuses.count(401) <= 12  # the guessing is stopped at the budget
        # The right secret is no way round it meanwhile.
        right = {**wrong_secret(client_id), "client_secret": secret}
        assert_too_many_token_requests(await service.http.post(TOKEN, data=right))


@pytest.mark.parametrize("storage", ["process", "redis"])
async def test_wrong_secrets_from_one_address_never_keep_the_right_one_out_from_another(
    database_url: str, database: Database, storage: str
) -> None:
    # A minute's budget: a window that rolled over mid-test would hand out fresh counts.
    shared = redis_settings() if storage == "redis" else {}
    settings = make_settings(database_url, token_rate_limit="10/minute", **shared)
    async with serving(settings, database) as service:
        client_id, secret, _ = await service.client_credentials()
        right = {**wrong_secret(client_id), "client_secret": secret}
        attacker, honest = from_address("203.0.113.7"), from_address("198.51.100.1")
        # The attacker knows the client_id and sends wrong secrets at the limit's rate; the
        # client, from its own address, asks for a token after each of them.
        tokens = 0
        for _ in range(10):
            guess = await service.http.post(TOKEN, data=wrong_secret(client_id), headers=attacker)
            assert guess.status_code == 401
            answer = await service.http.post(TOKEN, data=right, headers=honest)
            tokens += answer.status_code == 200
        assert tokens == 10
        # Basic authentication too, from yet another address.
        basic_answer = await service.http.post(
            TOKEN,
            data={"grant_type": "client_credentials"},
            headers={**basic(client_id, secret), **from_address("198.51.100.2")},
        )
        assert basic_answer.status_code == 200
        # The attacking address itself is held: even the right secret is refused there.
        assert_too_many_token_requests(
            await service.http.post(TOKEN, data=wrong_secret(client_id), headers=attacker)
        )
        assert_too_many_token_requests(await service.http.post(TOKEN, data=right, headers=attacker))


async def test_the_limit_holds_per_address_whatever_the_client_id(
    database_url: str, database: Database
) -> None:
    settings = make_settings(database_url, token_rate_limit="3/second")
    async with serving(settings, database) as service:
        answers = [
            await service.http.post(
                TOKEN, data=wrong_secret(f"tci_guess{i}"), headers=from_address("203.0.113.7")
            )
            for i in range(8)
        ]
        assert [a.status_code for a in answers[:3]] == [401] * 3
        assert_too_many_token_requests(answers[-1])
        # Even a request the endpoint would refuse on sight counts, and is refused first.
        assert_too_many_token_requests(
            await service.http.post(TOKEN, data={}, headers=from_address("203.0.113.7"))
        )
        client_id, secret, _ = await service.client_credentials()
        fine = await service.http.post(
            TOKEN,
            data={**wrong_secret(client_id), "client_secret": secret},
            headers=from_address("203.0.113.8"),
        )
        assert fine.status_code == 200


async def test_a_token_request_over_the_limit_costs_no_database_work(
    database_url: str, database: Database
) -> None:
    # A minute's budget: a window that rolled over mid-test would let a request through.
    settings = make_settings(database_url, token_rate_limit="2/minute")
    async with serving(settings, database) as service:
        client_id, _, _ = await service.client_credentials()
        while (await service.http.post(TOKEN, data=wrong_secret(client_id))).status_code != 429:
            pass
        service.app.state.database = NoDatabase()
        try:
            assert_too_many_token_requests(
                await service.http.post(TOKEN, data=wrong_secret(client_id))
            )
        finally:
            service.app.state.database = database


async def test_two_instances_sharing_a_redis_share_the_token_budget(
    database_url: str, database: Database
) -> None:
    settings = make_settings(database_url, token_rate_limit="3/second", **redis_settings())
    async with serving(settings, database) as one, serving(settings, database) as other:
        client_id, _, _ = await one.client_credentials()
        statuses = []
        for _ in range(3):
            for service in (one, other):
                response = await service.http.post(TOKEN, data=wrong_secret(client_id))
                statuses.append(response.status_code)
        # 3/second in all: alone, neither instance would have refused its three.
        assert statuses[:3] == [401] * 3 and 429 in statuses[3:], statuses
