"""The one error body for what the framework answers too, and x-transaction-id handling."""

from __future__ import annotations

import gzip
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.core.errors import ErrorCode


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


async def test_unknown_route_is_404_in_the_error_body(service: RunningService) -> None:
    error = assert_error_body(
        await service.http.get("/no/such/route"), 404, ErrorCode.ROUTE_NOT_FOUND
    )
    assert "/no/such/route" in error["errors"][0]


async def test_wrong_method_is_405_with_allow(merchant: Merchant) -> None:
    response = await merchant.request("PATCH", "/webhook/v1/1")
    assert_error_body(response, 405, ErrorCode.METHOD_NOT_ALLOWED)
    assert "PUT" in response.headers["allow"]
    assert_error_body(await merchant.get("/webhook/v1/create"), 405)


async def test_malformed_json_is_400(merchant: Merchant) -> None:
    response = await merchant.post(
        "/webhook/v1/create",
        content=b'{"targetUrl": ',
        headers={"content-type": "application/json"},
    )
    error = assert_error_body(response, 400, ErrorCode.MALFORMED_BODY)
    assert error["errors"] == ["body is not valid JSON"]


@pytest.mark.parametrize(
    ("path", "document"),
    [
        ("/webhook/v1/create", "[" * 100_000 + "]" * 100_000),
        ("/payment-link/v1", '{"a":' * 5_000 + "1" + "}" * 5_000),
    ],
)
async def test_a_body_nested_past_the_parsers_limit_says_so(
    merchant: Merchant, path: str, document: str
) -> None:
    response = await merchant.post(
        path,
        content=document,
        headers={"content-type": "application/json", "x-transaction-id": "nested-1"},
    )
    error = assert_error_body(response, 400, ErrorCode.MALFORMED_BODY)
    assert error["errors"] == ["body is nested too deeply (arrays and objects within each other)"]


@pytest.mark.parametrize("document", [b"NaN", b'{"partnerId": NaN}', b'{"a": Infinity}'])
async def test_non_standard_json_numbers_are_malformed(merchant: Merchant, document: bytes) -> None:
    response = await merchant.post(
        "/webhook/v1/create", content=document, headers={"content-type": "application/json"}
    )
    assert_error_body(response, 400, ErrorCode.MALFORMED_BODY)


async def test_missing_body_is_400(merchant: Merchant) -> None:
    response = await merchant.post("/webhook/v1/create")
    error = assert_error_body(response, 400)
    assert error["errors"] == ["body is required"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]
)
async def test_wrong_content_type_is_415(merchant: Merchant, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = await merchant.post(
        "/webhook/v1/create",
        content=b'{"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"}',
        headers=headers,
    )
    assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)


@pytest.mark.parametrize(("method", "path"), [("POST", "/secret/rotate"), ("DELETE", "")])
async def test_a_body_of_another_type_is_415_where_no_body_is_taken(
    merchant: Merchant, method: str, path: str
) -> None:
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"},
    )
    url = f"/webhook/v1/{created.json()['webhookId']}"
    response = await merchant.request(
        method, url + path, content=b"<a/>", headers={"content-type": "application/xml"}
    )
    assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    # Nothing was done: the secret is the one made at creation, the webhook is still there.
    assert (await merchant.get(url + "/secret")).json()["secret"] == created.json()["secret"]
    # Without a body, as the operations are meant to be called.
    assert (await merchant.request(method, url + path)).status_code in (200, 204)


@pytest.mark.parametrize("encoding", ["br", "gzip"])
async def test_a_compressed_body_is_415_not_read_as_it_is(
    merchant: Merchant, encoding: str
) -> None:
    response = await merchant.post(
        "/webhook/v1/create",
        content=b'{"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"}',
        headers={"content-type": "application/json", "content-encoding": encoding},
    )
    error = assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    assert error["errors"] == [f"Content-Encoding {encoding} is not supported: send the body as is"]
    # Every Content-Encoding header counts (together they list the codings applied).
    response = await merchant.service.http.post(
        "/webhook/v1/create",
        content=b'{"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"}',
        headers=[
            *merchant.headers.items(),
            ("content-type", "application/json"),
            ("content-encoding", "identity"),
            ("content-encoding", encoding),
        ],
    )
    assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    assert (await merchant.get("/webhook/v1/list")).json()["totalElements"] == 0


async def test_a_really_compressed_body_is_415_too(merchant: Merchant) -> None:
    # Not a 400 "not valid JSON": the coding is refused before the body is read (fuzz audit).
    compressed = gzip.compress(
        b'{"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"}'
    )
    for path, headers in (
        ("/webhook/v1/create", {}),
        ("/payment-link/v1", {"x-transaction-id": str(uuid.uuid4())}),
    ):
        response = await merchant.post(
            path,
            content=compressed,
            headers={"content-type": "application/json", "content-encoding": "gzip", **headers},
        )
        error = assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
        assert error["errors"] == ["Content-Encoding gzip is not supported: send the body as is"]


async def test_answers_are_never_kept_by_a_cache(merchant: Merchant) -> None:
    # A webhook's answers carry its signing secret; every answer, customers' data.
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"},
    )
    webhook = created.json()["webhookId"]
    for response in (
        created,
        await merchant.get(f"/webhook/v1/{webhook}/secret"),
        await merchant.post(f"/webhook/v1/{webhook}/secret/rotate"),
        await merchant.get("/webhook/v1/list"),
        await merchant.get("/webhook/v1/999999"),
    ):
        assert response.headers["cache-control"] == "no-store", response.request.url


async def test_headers_over_32_kib_are_a_431(merchant: Merchant) -> None:
    response = await merchant.get("/webhook/v1/list", headers={"x-padding": "a" * 40_000})
    error = assert_error_body(response, 431, ErrorCode.HEADERS_TOO_LARGE)
    assert error["errors"] == ["the request headers must be at most 32768 bytes"]
    many = [(f"x-h{n}", "v") for n in range(5_000)]
    response = await merchant.service.http.get(
        "/webhook/v1/list", headers=[*merchant.headers.items(), *many]
    )
    assert_error_body(response, 431, ErrorCode.HEADERS_TOO_LARGE)
    assert (await merchant.get("/webhook/v1/list", headers={"x-padding": "a" * 8_000})).is_success


async def test_json_with_charset_is_accepted(merchant: Merchant) -> None:
    for charset in ("utf-8", '"UTF-8"', "utf8", "us-ascii"):  # ASCII is UTF-8 too
        response = await merchant.post(
            "/webhook/v1/create",
            content=b'{"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"}',
            headers={"content-type": f"application/json; charset={charset}"},
        )
        assert response.status_code == 200


async def test_a_body_in_another_charset_is_415_not_malformed_json(merchant: Merchant) -> None:
    # (Fuzz audit: a valid Latin-1 body was answered "not valid JSON".)
    response = await merchant.post(
        "/webhook/v1/create",
        content='{"targetUrl": "https://a.example.com/é", "eventType": "PIX_OUTBOUND"}'.encode(
            "latin-1"
        ),
        headers={"content-type": "application/json; charset=ISO-8859-1"},
    )
    error = assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    assert error["errors"] == ["a body must be in UTF-8, not iso-8859-1"]


async def test_query_text_with_no_parameter_names_is_not_a_repeated_parameter(
    merchant: Merchant,
) -> None:
    response = await merchant.get("/webhook/v1/list?&&=&=")
    assert response.status_code == 200, response.text


async def test_body_over_1_mib_is_413(merchant: Merchant) -> None:
    big = b'{"targetUrl": "' + b"a" * (1024 * 1024) + b'"}'
    response = await merchant.post(
        "/webhook/v1/create", content=big, headers={"content-type": "application/json"}
    )
    assert_error_body(response, 413, ErrorCode.PAYLOAD_TOO_LARGE)


async def test_streamed_body_over_1_mib_is_413(merchant: Merchant) -> None:
    async def chunks() -> object:
        for _ in range(20):
            yield b"x" * (64 * 1024)

    response = await merchant.post(
        "/webhook/v1/create", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_error_body(response, 413, ErrorCode.PAYLOAD_TOO_LARGE)


async def test_token_endpoint_body_is_limited_too(service: RunningService) -> None:
    response = await service.http.post(
        "/oauth/v1/token",
        content=b"grant_type=" + b"a" * (2 * 1024 * 1024),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    # The token endpoint's errors are RFC 6749's (5.2), this one too, and documented so.
    assert response.status_code == 413
    body = response.json()
    assert set(body) == {"error", "error_description"}
    document = (await service.http.get("/openapi.json")).json()
    documented = document["paths"]["/oauth/v1/token"]["post"]["responses"]["413"]
    assert documented["content"]["application/json"]["schema"]["$ref"].endswith("/OAuthError")
    assert body["error"] == "invalid_request"
    assert "1048576 bytes" in body["error_description"]


async def test_token_endpoint_streamed_body_over_the_limit_is_an_oauth_413(
    service: RunningService,
) -> None:
    async def chunks() -> object:  # no Content-Length: the limit is found while reading
        yield b"grant_type="
        for _ in range(20):
            yield b"a" * (64 * 1024)

    response = await service.http.post(
        "/oauth/v1/token",
        content=chunks(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 413
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "the request body must be at most 1048576 bytes",
    }


async def test_transaction_id_is_echoed_and_put_in_errors(merchant: Merchant) -> None:
    given = str(uuid.uuid4())
    response = await merchant.get("/webhook/v1/list", headers={"x-transaction-id": given})
    assert response.headers["x-transaction-id"] == given
    error = await merchant.get("/webhook/v1/abc", headers={"x-transaction-id": given})
    assert assert_error_body(error, 400)["xTransactionId"] == given


async def test_transaction_id_is_generated_when_absent(merchant: Merchant) -> None:
    first = await merchant.get("/webhook/v1/list")
    second = await merchant.get("/webhook/v1/list")
    generated = first.headers["x-transaction-id"]
    assert uuid.UUID(generated) and generated != second.headers["x-transaction-id"]


@pytest.mark.parametrize("given", ["a b <script>", "{" + "7" * 200 + "}", "order 42/7 #1"])
async def test_any_printable_transaction_id_is_echoed(merchant: Merchant, given: str) -> None:
    response = await merchant.get("/webhook/v1/list", headers={"x-transaction-id": given})
    assert response.status_code == 200
    assert response.headers["x-transaction-id"] == given
    error = await merchant.get("/webhook/v1/abc", headers={"x-transaction-id": given})
    assert assert_error_body(error, 400)["xTransactionId"] == given


@pytest.mark.parametrize("given", ["x" * 257, "caf\u00e9", "tab\there"])
async def test_an_unusable_transaction_id_is_replaced(merchant: Merchant, given: str) -> None:
    response = await merchant.get(
        "/webhook/v1/list", headers={"x-transaction-id": given.encode("latin-1")}
    )
    assert response.status_code == 200
    assert uuid.UUID(response.headers["x-transaction-id"])


async def test_an_unexpected_crash_is_a_500_error_body_without_internals(
    service: RunningService,
) -> None:
    @service.app.get("/__crash_for_test")
    async def crash() -> None:
        raise RuntimeError("secret internals: password=hunter2")

    try:
        response = await service.http.get("/__crash_for_test")
        error = assert_error_body(response, 500, ErrorCode.UNEXPECTED)
        assert "hunter2" not in response.text and "Traceback" not in response.text
        assert error["message"] == "Unexpected system error"
    finally:
        service.app.router.routes.pop()


async def test_health_reports_ok(service: RunningService) -> None:
    response = await service.http.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert (await service.http.get("/health/live")).json() == {"status": "ok"}


async def test_health_is_a_503_to_retry_while_the_database_cannot_be_reached(
    service: RunningService, tmp_path: Path
) -> None:
    unreachable = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/no/such/dir/tucano.db")
    database = service.app.state.database
    service.app.state.database = SimpleNamespace(
        engine=unreachable, read_engine=unreachable, dialect="sqlite"
    )
    try:
        response = await service.http.get("/health")
    finally:
        service.app.state.database = database
        await unreachable.dispose()
    error = assert_error_body(response, 503, ErrorCode.UNAVAILABLE)
    assert error["errors"] == ["the database is not reachable"]
    assert response.headers["retry-after"] == "1"
    assert (await service.http.get("/health")).status_code == 200


async def test_an_unserved_method_is_405_before_authentication(service: RunningService) -> None:
    response = await service.http.request("OPTIONS", "/webhook/v1/list")
    assert_error_body(response, 405, ErrorCode.METHOD_NOT_ALLOWED)
    assert response.headers["allow"] == "GET, HEAD"


async def test_a_trailing_slash_is_read_as_the_path_without_it(merchant: Merchant) -> None:
    # Not redirected (a client would not follow a redirect of a POST): answered in place.
    listed = await merchant.get("/webhook/v1/list/")
    assert listed.status_code == 200, listed.text
    assert listed.json()["content"] == []
    created = await merchant.post(
        "/payment-link/v1//",
        json={
            "payerName": "Ana",
            "registrationNumber": "52998224725",
            "amount": 10,
            "numbersInstallments": 1,
            "expirationDays": 1,
        },
        headers={"x-transaction-id": str(uuid.uuid4())},
    )
    assert created.status_code == 200, created.text
    assert_error_body(await merchant.get("/webhook/v2/list/"), 404, ErrorCode.ROUTE_NOT_FOUND)


async def test_a_query_parameter_with_an_empty_value_is_an_invalid_value(
    merchant: Merchant,
) -> None:
    response = await merchant.get("/webhook/v1/list?eventType=")
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"][0].startswith("eventType ")


async def test_authentication_comes_before_content_checks(service: RunningService) -> None:
    response = await service.http.post(
        "/webhook/v1/create", content=b"x", headers={"content-type": "text/plain"}
    )
    assert_error_body(response, 401, ErrorCode.UNAUTHENTICATED)


async def test_nul_characters_are_refused_in_bodies_and_queries(merchant: Merchant) -> None:
    body = b'{"targetUrl": "https://a.example.com/\\u0000", "eventType": "PIX_OUTBOUND"}'
    response = await merchant.post(
        "/webhook/v1/create", content=body, headers={"content-type": "application/json"}
    )
    # Valid JSON holding what no field may: an invalid parameter, named.
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == ["targetUrl must not contain the NUL character (\\u0000)"]
    response = await merchant.get("/webhook/v1/list?eventType=PIX%00")
    assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)


_HOOK = b'"targetUrl": "https://a.example.com/", "eventType": "PIX_OUTBOUND"'


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (b"{" + _HOOK + b', "eventType": "CARD_CHARGEBACK"}', "eventType is given more than once"),
        (b"{" + _HOOK + b', "extra": {"a": 1, "a": 2}}', "a is given more than once"),
        # UTF-8 cannot carry a lone surrogate: the answer failed (500) when an error named one.
        (b'{"\\ud800": 1, "\\ud800": 2}', "\\ud800 is given more than once"),
        (b'{"x": {"\\udfff": "\\u0000"}}', "x.\\udfff must not contain the NUL character"),
        # A key that holds a card number is named without it.
        (
            b'{"x": {"4111111111111111": "\\u0000"}}',
            "x.(a key holding a card number) must not contain the NUL character",
        ),
        (
            b'{"4111 1111 1111 1111": 1, "4111 1111 1111 1111": 2}',
            "(a key holding a card number) is given more than once",
        ),
    ],
)
async def test_a_body_refused_while_parsing_names_the_field(
    merchant: Merchant, body: bytes, line: str
) -> None:
    # A key given twice: which one was meant? Parsers disagree (first or last), so neither.
    response = await merchant.post(
        "/webhook/v1/create", content=body, headers={"content-type": "application/json"}
    )
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert len(error["errors"]) == 1 and error["errors"][0].startswith(line), error
    assert (await merchant.get("/webhook/v1/list")).json()["totalElements"] == 0


async def test_head_is_get_without_the_body(merchant: Merchant) -> None:
    got = await merchant.get("/webhook/v1/list")
    head = await merchant.request("HEAD", "/webhook/v1/list")
    assert head.status_code == got.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["content-length"] == got.headers["content-length"]
    missing = await merchant.request("HEAD", "/webhook/v1/999999999999")
    assert missing.status_code == 404 and missing.content == b""


async def test_405_names_head_beside_get(merchant: Merchant) -> None:
    response = await merchant.post("/webhook/v1/list", json={})
    assert_error_body(response, 405, ErrorCode.METHOD_NOT_ALLOWED)
    assert response.headers["allow"] == "GET, HEAD"


async def test_a_single_valued_query_parameter_given_twice_is_400(
    merchant: Merchant, service: RunningService
) -> None:
    response = await merchant.get(
        "/webhook/v1/list?eventType=PIX_OUTBOUND&eventType=CARD_CHARGEBACK"
    )
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == ["query parameter eventType must be given at most once"]
    # Once the caller is known: without a token it is still a 401.
    anonymous = await service.http.get("/webhook/v1/list?page=0&page=1")
    assert_error_body(anonymous, 401, ErrorCode.UNAUTHENTICATED)
    # `sort` is a list: repeated on purpose.
    listed = await merchant.get(
        "/payment-link/v1/link-payment?startDate=2026-01-01&endDate=2026-01-31"
        "&sort=amount,desc&sort=payerName,asc",
        headers={"x-transaction-id": str(uuid.uuid4())},
    )
    assert listed.status_code == 200, listed.text
