"""A1-A5 over HTTP, on each database: every rule of spec 4.2 and decisions.md's webhook section."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.service import (
    EMPTY_PAGE,
    Merchant,
    RunningService,
    assert_error_body,
    start_service,
)
from tests.support.settings import make_settings
from tucano.auth.tokens import Scope
from tucano.core.errors import ErrorCode
from tucano.db.database import Database

EVENT_TYPES = [
    "PIX_OUTBOUND",
    "PIX_QR_INBOUND",
    "PIX_QR_PARTNER_INBOUND",
    "CARD_PAYMENT_INBOUND",
    "CARD_CHARGEBACK",
    "CARD_RECURRING_INBOUND",
    "PAYMENT_LINK_INBOUND",
]
WEBHOOK_FIELDS = {"webhookId", "customerId", "partnerId", "targetUrl", "eventType", "isActive"}


def hook(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "targetUrl": "https://hooks.example.com/tucano",
        "eventType": "PIX_OUTBOUND",
    }
    body.update(overrides)
    return body


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


async def create(merchant: Merchant, **overrides: Any) -> dict[str, Any]:
    response = await merchant.post("/webhook/v1/create", json=hook(**overrides))
    assert response.status_code == 200, response.text
    return dict(response.json())


# --- A2 create ----------------------------------------------------------------------------------


async def test_create_returns_the_webhook_with_its_id_customer_and_secret(
    merchant: Merchant,
) -> None:
    response = await merchant.post(
        "/webhook/v1/create", json=hook(partnerId=77, eventType="CARD_CHARGEBACK")
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == WEBHOOK_FIELDS | {"secret"}
    assert isinstance(body["webhookId"], int) and body["webhookId"] > 0
    assert body["customerId"] == merchant.customer_id
    assert body["partnerId"] == 77
    assert body["targetUrl"] == "https://hooks.example.com/tucano"
    assert body["eventType"] == "CARD_CHARGEBACK"
    assert body["isActive"] is True
    assert body["secret"].startswith("whsec_")
    assert len(base64.b64decode(body["secret"].removeprefix("whsec_"))) == 24


async def test_is_active_defaults_to_true_and_false_is_kept(merchant: Merchant) -> None:
    assert (await create(merchant))["isActive"] is True
    assert (await create(merchant, isActive=False))["isActive"] is False


@pytest.mark.parametrize("event_type", EVENT_TYPES)
async def test_every_event_type_of_the_spec_is_accepted(
    merchant: Merchant, event_type: str
) -> None:
    assert (await create(merchant, eventType=event_type))["eventType"] == event_type


async def test_partner_id_defaults_to_the_clients_partner(service: RunningService) -> None:
    merchant = await service.merchant(partner_id=4242)
    assert (await create(merchant))["partnerId"] == 4242
    assert (await create(merchant, partnerId=5))["partnerId"] == 5
    assert (await create(merchant, partnerId=None))["partnerId"] is None
    plain = await service.merchant()
    assert (await create(plain))["partnerId"] is None


async def test_customer_id_in_the_body_is_ignored(merchant: Merchant) -> None:
    body = await create(merchant, customerId=1)
    assert body["customerId"] == merchant.customer_id


async def test_each_webhook_gets_its_own_secret(merchant: Merchant) -> None:
    assert (await create(merchant))["secret"] != (await create(merchant))["secret"]


@pytest.fixture(scope="module")
async def service_of_two_webhooks(
    database_url: str, database: Database
) -> AsyncIterator[RunningService]:
    """The service with TUCANO_MAX_WEBHOOKS_PER_CUSTOMER=2."""
    running = await start_service(
        make_settings(database_url, max_webhooks_per_customer=2), database
    )
    yield running
    await running.stop()


async def test_creating_one_more_than_the_limit_is_a_409_naming_it(
    service_of_two_webhooks: RunningService,
) -> None:
    merchant = await service_of_two_webhooks.merchant()
    await create(merchant)
    await create(merchant, eventType="CARD_CHARGEBACK", isActive=False)
    response = await merchant.post("/webhook/v1/create", json=hook())
    error = assert_error_body(response, 409, ErrorCode.WEBHOOK_LIMIT_REACHED)
    assert error["errors"] == [
        "a customer may have at most 2 webhooks (TUCANO_MAX_WEBHOOKS_PER_CUSTOMER); "
        "delete one before creating another"
    ]
    listed = (await merchant.get("/webhook/v1/list")).json()
    assert listed["totalElements"] == 2
    other = await service_of_two_webhooks.merchant()
    await create(other)


@pytest.mark.parametrize(
    ("body", "field_message"),
    [
        ({"eventType": "PIX_OUTBOUND"}, "targetUrl is required"),
        ({"targetUrl": "https://a.example.com/"}, "eventType is required"),
        (hook(eventType="PIX"), "eventType must be one of"),
        (hook(eventType="pix_outbound"), "eventType must be one of"),
        (hook(eventType=3), "eventType must be one of"),
        (hook(targetUrl=""), "targetUrl must not be empty"),
        (hook(targetUrl=12), "targetUrl must be a string"),
        (hook(targetUrl=None), "targetUrl must be a string"),
        (hook(isActive="yes"), "isActive must be a boolean"),
        (hook(isActive="true"), "isActive must be a boolean"),
        (hook(isActive=1), "isActive must be a boolean"),
        (hook(partnerId="12"), "partnerId must be an integer"),
        (hook(partnerId=1.5), "partnerId must be an integer"),
        (hook(partnerId=0), "partnerId must be greater than or equal to 1"),
        (hook(partnerId=2**63), "partnerId must be less than or equal to"),
    ],
)
async def test_create_refuses_each_bad_field_naming_it(
    merchant: Merchant, body: dict[str, Any], field_message: str
) -> None:
    response = await merchant.post("/webhook/v1/create", json=body)
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert any(line.startswith(field_message) for line in error["errors"]), error


async def test_every_problem_is_one_line(merchant: Merchant) -> None:
    response = await merchant.post(
        "/webhook/v1/create", json={"eventType": "NOPE", "isActive": "x", "partnerId": "y"}
    )
    error = assert_error_body(response, 400)
    assert len(error["errors"]) == 4
    fields = sorted(line.split(" ")[0] for line in error["errors"])
    assert fields == ["eventType", "isActive", "partnerId", "targetUrl"]


@pytest.mark.parametrize("body", [[], "text", 5, 1.5, None])
async def test_a_body_that_is_not_an_object_is_refused(merchant: Merchant, body: Any) -> None:
    why = ["body is required"] if body is None else ["body must be a JSON object"]
    response = await merchant.post("/webhook/v1/create", json=body)
    assert assert_error_body(response, 400)["errors"] == why
    # An update, where every field is optional, too: not read as an empty change.
    webhook_id = (await create(merchant))["webhookId"]
    response = await merchant.put(f"/webhook/v1/{webhook_id}", json=body)
    assert assert_error_body(response, 400)["errors"] == why


async def test_a_refused_create_stores_nothing(merchant: Merchant) -> None:
    await merchant.post("/webhook/v1/create", json=hook(targetUrl="https://127.0.0.1/"))
    await merchant.post("/webhook/v1/create", json=hook(eventType="NOPE"))
    listed = (await merchant.get("/webhook/v1/list")).json()
    assert listed["totalElements"] == 0


# --- targetUrl rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/a?b=c",
        "https://hooks.example.com:8443/path",
        "https://8.8.8.8/hook",
        "https://[2001:4860:4860::8888]/hook",
        "http://hooks.example.com/plain-http-in-sandbox",
        "https://unresolvable.invalid-tld-for-tucano-tests/hook",
    ],
)
async def test_public_targets_are_accepted(merchant: Merchant, url: str) -> None:
    assert (await create(merchant, targetUrl=url))["targetUrl"] == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("hooks.example.com/path", "absolute https URL"),
        ("/relative/path", "absolute https URL"),
        ("ftp://hooks.example.com/", "absolute https URL"),
        ("javascript:alert(1)", "absolute https URL"),
        ("https://user:pass@hooks.example.com/", "credentials"),
        ("https://user@hooks.example.com/", "credentials"),
        ("https://hooks.example.com/" + "a" * 2030, "at most 2048 characters"),
        ("https://hooks example.com/", "ASCII without spaces"),
        ("https://hooks.exämple.com/", "ASCII"),
        ("https://hooks.example.com:99999/", "not a valid URL"),
        ("https://-bad-.example.com/", "valid host name"),
        ("https://", "absolute https URL"),
    ],
)
async def test_malformed_targets_are_refused(merchant: Merchant, url: str, reason: str) -> None:
    response = await merchant.post("/webhook/v1/create", json=hook(targetUrl=url))
    error = assert_error_body(response, 400)
    assert error["errors"][0].startswith("targetUrl")
    assert reason in error["errors"][0], error


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://localhost./hook",
        "https://2130706433/",
        "https://0x7f000001/",
        "https://0x7f.1/",
        "https://127.1/",
        "https://017700000001/",
        "https://10.0.0.5/",
        "https://172.16.3.4/",
        "https://192.168.1.1/",
        "https://100.64.0.1/",
        "https://169.254.169.254/latest/meta-data/",
        "https://metadata.google.internal/computeMetadata/v1/",
        "https://224.0.0.1/",
        "https://0.0.0.0/",
        "https://[::1]/",
        "https://[::]/",
        "https://[fe80::1]/",
        "https://[fd00:ec2::254]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[::ffff:7f00:1]/",
        "https://[64:ff9b::a9fe:a9fe]/",
        "https://[2002:7f00:1::]/",
        "https://[ff02::1]/",
        "https://service.internal/",
        "https://printer.local/",
    ],
)
async def test_non_public_targets_are_refused(merchant: Merchant, url: str) -> None:
    response = await merchant.post("/webhook/v1/create", json=hook(targetUrl=url))
    error = assert_error_body(response, 400, ErrorCode.WEBHOOK_TARGET_REFUSED)
    assert "targetUrl" in error["errors"][0]
    assert "public" in error["errors"][0]


NOT_PUBLIC = (
    "is not a public address; webhooks are only sent to public hosts (see "
    "TUCANO_WEBHOOK_ALLOWED_NETWORKS for local development)"
)


async def test_a_refused_name_is_named_without_the_address_it_resolved_to(
    merchant: Merchant,
) -> None:
    # localhost resolves (to 127.0.0.1, ::1 or both), and is no public host.
    response = await merchant.post("/webhook/v1/create", json=hook(targetUrl="https://localhost/x"))
    error = assert_error_body(response, 400, ErrorCode.WEBHOOK_TARGET_REFUSED)
    assert error["errors"] == [f"targetUrl host localhost {NOT_PUBLIC}"]
    assert "127.0.0.1" not in response.text and "::1" not in response.text


async def test_plain_http_is_refused_in_production(production_service: RunningService) -> None:
    merchant = await production_service.merchant()
    response = await merchant.post(
        "/webhook/v1/create", json=hook(targetUrl="http://hooks.example.com/x")
    )
    error = assert_error_body(response, 400)
    assert "https" in error["errors"][0]
    ok = await merchant.post(
        "/webhook/v1/create", json=hook(targetUrl="https://hooks.example.com/x")
    )
    assert ok.status_code == 200


async def test_allowed_networks_let_private_targets_through(
    database_url: str, database: Any
) -> None:
    from tests.support.service import start_service
    from tests.support.settings import make_settings

    running = await start_service(
        make_settings(database_url, webhook_allowed_networks="127.0.0.0/8,10.1.0.0/16"), database
    )
    try:
        merchant = await running.merchant()
        for url in (
            "http://127.0.0.1:9000/hook",
            "http://localhost:9000/hook",
            "https://10.1.2.3/",
        ):
            assert (await create(merchant, targetUrl=url))["targetUrl"] == url
        outside = await merchant.post(
            "/webhook/v1/create", json=hook(targetUrl="https://10.2.0.1/")
        )
        assert_error_body(outside, 400, ErrorCode.WEBHOOK_TARGET_REFUSED)
    finally:
        await running.stop()


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("https://134744072/x", "8.8.8.8"),
        ("https://8.8.2056/x", "8.8.8.8"),
        ("https://0x8.8.8.8/x", "8.8.8.8"),
        ("https://010.8.8.8/x", "8.8.8.8"),
        ("http://127.1:9000/hook", "127.0.0.1"),  # inside the allowed networks
        ("http://2130706433:9000/hook", "127.0.0.1"),
    ],
)
async def test_an_ipv4_address_in_an_unusual_spelling_is_refused(
    database_url: str, database: Any, url: str, written: str
) -> None:
    from tests.support.service import start_service
    from tests.support.settings import make_settings

    # HTTP clients refuse these spellings: a webhook registered with one would never be sent.
    running = await start_service(
        make_settings(database_url, webhook_allowed_networks="127.0.0.0/8"), database
    )
    try:
        merchant = await running.merchant()
        response = await merchant.post("/webhook/v1/create", json=hook(targetUrl=url))
        error = assert_error_body(response, 400, ErrorCode.WEBHOOK_TARGET_REFUSED)
        assert error["errors"][0].endswith(f"unusual spelling; write it as {written}")
    finally:
        await running.stop()


# --- A3 read, A1 list ---------------------------------------------------------------------------


async def test_read_returns_the_six_fields_without_the_secret(merchant: Merchant) -> None:
    created = await create(merchant, partnerId=3, isActive=False)
    response = await merchant.get(f"/webhook/v1/{created['webhookId']}")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == WEBHOOK_FIELDS
    assert body == {k: v for k, v in created.items() if k != "secret"}


async def test_empty_list_is_the_empty_page_of_spec_2_2(merchant: Merchant) -> None:
    response = await merchant.get("/webhook/v1/list")
    assert response.status_code == 200
    assert response.json() == EMPTY_PAGE
    # Whichever page is asked for: an empty result is first and last (spec 2.2).
    later = await merchant.get("/webhook/v1/list", params={"page": 5})
    assert later.json() == EMPTY_PAGE | {"number": 5}


async def test_list_pages_through_in_creation_order(merchant: Merchant) -> None:
    ids = [(await create(merchant))["webhookId"] for _ in range(5)]
    first = (await merchant.get("/webhook/v1/list", params={"size": 2})).json()
    assert [w["webhookId"] for w in first["content"]] == ids[:2]
    assert first | {"content": None} == {
        "content": None,
        "totalElements": 5,
        "totalPages": 3,
        "size": 2,
        "number": 0,
        "first": True,
        "last": False,
        "empty": False,
    }
    last = (await merchant.get("/webhook/v1/list", params={"size": 2, "page": 2})).json()
    assert [w["webhookId"] for w in last["content"]] == ids[4:]
    assert (last["first"], last["last"], last["number"]) == (False, True, 2)
    far = 2**31 - 1
    beyond = (await merchant.get("/webhook/v1/list", params={"size": 100, "page": far})).json()
    assert beyond["content"] == [] and beyond["empty"] is True and beyond["totalElements"] == 5
    assert beyond["number"] == far


async def test_list_default_size_is_20(merchant: Merchant) -> None:
    for _ in range(21):
        await create(merchant)
    page = (await merchant.get("/webhook/v1/list")).json()
    assert page["size"] == 20 and len(page["content"]) == 20 and page["totalPages"] == 2


async def test_list_filters_by_event_type(merchant: Merchant) -> None:
    await create(merchant, eventType="PIX_OUTBOUND")
    card = await create(merchant, eventType="CARD_CHARGEBACK")
    page = (await merchant.get("/webhook/v1/list", params={"eventType": "CARD_CHARGEBACK"})).json()
    assert [w["webhookId"] for w in page["content"]] == [card["webhookId"]]
    assert page["totalElements"] == 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"size": 0}, "size must be greater than or equal to 1"),
        ({"size": 101}, "size must be less than or equal to 100"),
        ({"size": "ten"}, "size must be an integer"),
        ({"page": -1}, "page must be greater than or equal to 0"),
        ({"page": "1.5"}, "page must be an integer"),
        ({"page": 2**31}, "page must be less than or equal to 2147483647"),
        ({"page": 10**40}, "page must be less than or equal to"),
        # Longer than Python parses (4300 digits): still a number, too large or too small.
        ({"page": "9" * 5000}, "page must be less than or equal to 2147483647"),
        ({"page": "-" + "9" * 5000}, "page must be greater than or equal to 0"),
        # Only plain digits: what lax integer parsing would read as 10, 1 and 5.
        ({"size": "1_0"}, "size must be an integer"),
        ({"page": "+1"}, "page must be an integer"),
        ({"size": "5.0"}, "size must be an integer"),
        ({"eventType": "NOPE"}, "eventType must be one of"),
    ],
)
async def test_list_refuses_bad_query_values(
    merchant: Merchant, params: dict[str, Any], message: str
) -> None:
    error = assert_error_body(await merchant.get("/webhook/v1/list", params=params), 400)
    assert any(line.startswith(message) for line in error["errors"]), error


async def test_size_100_is_allowed(merchant: Merchant) -> None:
    assert (await merchant.get("/webhook/v1/list", params={"size": 100})).json()["size"] == 100


# --- A4 update ----------------------------------------------------------------------------------


async def test_put_replaces_only_the_fields_sent(merchant: Merchant) -> None:
    created = await create(merchant, partnerId=9)
    webhook_id = created["webhookId"]
    response = await merchant.put(f"/webhook/v1/{webhook_id}", json={"isActive": False})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == WEBHOOK_FIELDS
    assert body["isActive"] is False
    assert body["targetUrl"] == created["targetUrl"] and body["partnerId"] == 9

    response = await merchant.put(
        f"/webhook/v1/{webhook_id}",
        json={
            "targetUrl": "https://other.example.com/x",
            "eventType": "PIX_QR_INBOUND",
            "isActive": True,
        },
    )
    assert response.json() | {"webhookId": 0} == {
        "webhookId": 0,
        "customerId": merchant.customer_id,
        "partnerId": 9,
        "targetUrl": "https://other.example.com/x",
        "eventType": "PIX_QR_INBOUND",
        "isActive": True,
    }
    stored = (await merchant.get(f"/webhook/v1/{webhook_id}")).json()
    assert stored["eventType"] == "PIX_QR_INBOUND" and stored["isActive"] is True


async def test_put_accepts_partner_id_and_clears_it_with_null(merchant: Merchant) -> None:
    webhook_id = (await create(merchant))["webhookId"]
    body = (await merchant.put(f"/webhook/v1/{webhook_id}", json={"partnerId": 12})).json()
    assert body["partnerId"] == 12
    body = (await merchant.put(f"/webhook/v1/{webhook_id}", json={"partnerId": None})).json()
    assert body["partnerId"] is None


async def test_put_with_an_empty_body_changes_nothing(merchant: Merchant) -> None:
    created = await create(merchant)
    body = (await merchant.put(f"/webhook/v1/{created['webhookId']}", json={})).json()
    assert body == {k: v for k, v in created.items() if k != "secret"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"targetUrl": None}, "targetUrl must not be null"),
        ({"isActive": None}, "isActive must not be null"),
        ({"eventType": "X"}, "eventType must be one of"),
        ({"targetUrl": "https://10.0.0.1/"}, "targetUrl host 10.0.0.1"),
        ({"targetUrl": "notaurl"}, "targetUrl must be an absolute https URL"),
    ],
)
async def test_put_validates_like_create_and_changes_nothing_on_error(
    merchant: Merchant, body: dict[str, Any], message: str
) -> None:
    created = await create(merchant)
    response = await merchant.put(f"/webhook/v1/{created['webhookId']}", json=body)
    error = assert_error_body(response, 400)
    assert any(line.startswith(message) for line in error["errors"]), error
    stored = (await merchant.get(f"/webhook/v1/{created['webhookId']}")).json()
    assert stored == {k: v for k, v in created.items() if k != "secret"}


# --- A5 delete ----------------------------------------------------------------------------------


async def test_delete_answers_204_without_body_and_the_webhook_is_gone(merchant: Merchant) -> None:
    webhook_id = (await create(merchant))["webhookId"]
    response = await merchant.delete(f"/webhook/v1/{webhook_id}")
    assert response.status_code == 204
    assert response.content == b""
    assert_error_body(
        await merchant.get(f"/webhook/v1/{webhook_id}"), 404, ErrorCode.WEBHOOK_NOT_FOUND
    )
    assert_error_body(await merchant.delete(f"/webhook/v1/{webhook_id}"), 404)


async def test_a_deleted_webhooks_id_is_never_given_to_another(
    merchant: Merchant, service: RunningService
) -> None:
    newest = (await create(merchant))["webhookId"]
    assert (await merchant.delete(f"/webhook/v1/{newest}")).status_code == 204
    mine = (await create(merchant))["webhookId"]
    theirs = (await create(await service.merchant()))["webhookId"]
    assert newest not in (mine, theirs)
    assert_error_body(await merchant.get(f"/webhook/v1/{newest}"), 404, ErrorCode.WEBHOOK_NOT_FOUND)


# --- ids and other customers ---------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["abc", "1.5", "1_0", "+1", "%201"])
async def test_an_id_that_is_not_an_integer_is_a_400(merchant: Merchant, bad_id: str) -> None:
    error = assert_error_body(await merchant.get(f"/webhook/v1/{bad_id}"), 400)
    assert error["errors"][0].startswith("id ")


@pytest.mark.parametrize("unknown_id", ["0", "-1", str(2**63), "9" * 5000])
async def test_an_integer_outside_the_ids_given_out_is_a_missing_webhook(
    merchant: Merchant, unknown_id: str
) -> None:
    # As any id never given out: a client looking up webhook 0 expects a 404, not a lecture on
    # the range of ids.
    for method, path in (
        ("GET", f"/webhook/v1/{unknown_id}"),
        ("DELETE", f"/webhook/v1/{unknown_id}"),
        ("GET", f"/webhook/v1/{unknown_id}/secret"),
        ("POST", f"/webhook/v1/{unknown_id}/secret/rotate"),
    ):
        response = await merchant.request(method, path)
        assert_error_body(response, 404, ErrorCode.WEBHOOK_NOT_FOUND)
    response = await merchant.put(f"/webhook/v1/{unknown_id}", json={"isActive": False})
    assert_error_body(response, 404, ErrorCode.WEBHOOK_NOT_FOUND)


async def test_an_id_of_thousands_of_digits_is_read_as_the_number_it_is(
    merchant: Merchant,
) -> None:
    # Leading zeros do not make a number large: this is webhook 7, which is not the caller's.
    response = await merchant.get(f"/webhook/v1/{'0' * 5000}7")
    assert_error_body(response, 404, ErrorCode.WEBHOOK_NOT_FOUND)


async def test_another_customers_webhook_is_answered_exactly_like_a_missing_one(
    service: RunningService,
) -> None:
    owner = await service.merchant()
    stranger = await service.merchant()
    theirs = (await create(owner))["webhookId"]
    missing = theirs + 10_000_000

    for method, suffix, body in [
        ("GET", "", None),
        ("PUT", "", {"isActive": False}),
        ("DELETE", "", None),
        ("GET", "/secret", None),
        ("POST", "/secret/rotate", None),
    ]:
        foreign = await stranger.request(method, f"/webhook/v1/{theirs}{suffix}", json=body)
        absent = await stranger.request(method, f"/webhook/v1/{missing}{suffix}", json=body)
        foreign_body = assert_error_body(foreign, 404, ErrorCode.WEBHOOK_NOT_FOUND)
        absent_body = assert_error_body(absent, 404, ErrorCode.WEBHOOK_NOT_FOUND)
        for key in ("errorCode", "message", "errors"):
            assert foreign_body[key] == absent_body[key]

    assert (await stranger.get("/webhook/v1/list")).json()["totalElements"] == 0
    still = (await owner.get(f"/webhook/v1/{theirs}")).json()
    assert still["isActive"] is True


# --- signing secret -----------------------------------------------------------------------------


async def test_secret_can_be_read_and_rotated(merchant: Merchant) -> None:
    created = await create(merchant)
    webhook_id = created["webhookId"]
    read = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()
    assert read == {"secret": created["secret"], "previousSecretExpiresAt": None}

    rotated = await merchant.post(f"/webhook/v1/{webhook_id}/secret/rotate")
    assert rotated.status_code == 200
    body = rotated.json()
    assert body["secret"].startswith("whsec_") and body["secret"] != created["secret"]
    assert body["previousSecretExpiresAt"].endswith("Z")
    assert (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"] == body[
        "secret"
    ]
    # A second rotation: previousSecretExpiresAt is when the last replaced secret stops signing.
    again = (await merchant.post(f"/webhook/v1/{webhook_id}/secret/rotate")).json()
    assert again["previousSecretExpiresAt"] >= body["previousSecretExpiresAt"]
    assert (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json() == again


# --- authentication and scopes on these routes --------------------------------------------------


ROUTES = [
    ("GET", "/webhook/v1/list", None),
    ("POST", "/webhook/v1/create", hook()),
    ("GET", "/webhook/v1/1", None),
    ("PUT", "/webhook/v1/1", {"isActive": True}),
    ("DELETE", "/webhook/v1/1", None),
    ("GET", "/webhook/v1/1/secret", None),
    ("POST", "/webhook/v1/1/secret/rotate", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_every_route_needs_a_token(
    service: RunningService, method: str, path: str, body: Any
) -> None:
    response = await service.http.request(method, path, json=body)
    assert_error_body(response, 401, ErrorCode.UNAUTHENTICATED)
    # RFC 6750 section 3.1: no error code in the challenge when no credentials were sent.
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("authorization", "challenge"),
    [
        ("Basic dXNlcjpwYXNz", 'Bearer error="invalid_request"'),
        ("Bearer", 'Bearer error="invalid_request"'),
        ("Bearer not.a.token", 'Bearer error="invalid_token"'),
    ],
)
async def test_a_failed_token_says_why_in_the_challenge(
    service: RunningService, authorization: str, challenge: str
) -> None:
    response = await service.http.get("/webhook/v1/list", headers={"Authorization": authorization})
    assert_error_body(response, 401, ErrorCode.UNAUTHENTICATED)
    assert response.headers["www-authenticate"] == challenge


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_scopes_are_enforced_per_operation(
    service: RunningService, method: str, path: str, body: Any
) -> None:
    # Reading the signing secret needs write: the secret lets its holder forge deliveries.
    writes = method != "GET" or path.endswith("/secret")
    missing = Scope.WEBHOOK_WRITE if writes else Scope.WEBHOOK_READ
    others = [s for s in Scope if s != missing]
    merchant = await service.merchant(scopes=others)
    response = await merchant.request(method, path, json=body)
    error = assert_error_body(response, 403, ErrorCode.INSUFFICIENT_SCOPE)
    assert missing.value in error["errors"][0]


async def test_read_scope_alone_lists_but_cannot_create(service: RunningService) -> None:
    reader = await service.merchant(scopes=[Scope.WEBHOOK_READ])
    assert (await reader.get("/webhook/v1/list")).status_code == 200
    assert_error_body(await reader.post("/webhook/v1/create", json=hook()), 403)


async def test_read_scope_alone_cannot_read_the_signing_secret(
    service: RunningService, merchant: Merchant
) -> None:
    webhook_id = (await merchant.post("/webhook/v1/create", json=hook())).json()["webhookId"]
    reader = await service.merchant(scopes=[Scope.WEBHOOK_READ], customer_id=merchant.customer_id)
    assert (await reader.get(f"/webhook/v1/{webhook_id}")).status_code == 200
    error = assert_error_body(await reader.get(f"/webhook/v1/{webhook_id}/secret"), 403)
    assert "webhook.write" in error["errors"][0]
