"""The OpenAPI document is served, complete and true to the routes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, get_args

import pytest

from tests.support.service import RunningService, start_service
from tests.support.settings import make_settings
from tucano.brazil.pix import is_valid_end_to_end_id
from tucano.core import json_codec
from tucano.db.database import Database
from tucano.events.payloads import PAYLOAD_MODELS, LinkEventStatus
from tucano.events.types import EventType

EXPECTED_OPERATIONS = {
    ("post", "/oauth/v1/token"),
    ("get", "/webhook/v1/list"),
    ("post", "/webhook/v1/create"),
    ("get", "/webhook/v1/{id}"),
    ("put", "/webhook/v1/{id}"),
    ("delete", "/webhook/v1/{id}"),
    ("get", "/webhook/v1/{id}/secret"),
    ("post", "/webhook/v1/{id}/secret/rotate"),
    ("get", "/webhook/v1/{id}/delivery-status"),
    ("post", "/webhook/v1/{id}/redeliver"),
    ("post", "/webhook/v1/{id}/recover"),
    ("get", "/webhook/v1/list/results"),
    ("post", "/webhook/v1/test-events"),
    ("post", "/internal/v1/events"),
    ("post", "/payment-link/v1"),
    ("get", "/payment-link/v1/link-payment"),
    ("get", "/payment-link/v1/{linkPaymentUuid}"),
    ("get", "/payment-link/v1/report"),
    ("post", "/portal/v1/sessions"),
}


async def test_document_lists_every_operation_with_errors_and_security(
    service: RunningService,
) -> None:
    response = await service.http.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    operations = {(method, path) for path, item in document["paths"].items() for method in item}
    assert operations >= EXPECTED_OPERATIONS

    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An access token from POST /oauth/v1/token (client credentials).",
    }
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for method, path in EXPECTED_OPERATIONS - {("post", "/oauth/v1/token")}:
        operation = document["paths"][path][method]
        assert operation["security"] == [{"bearerAuth": []}], (method, path)
        responses = operation["responses"]
        assert "422" not in responses
        for status in ("400", "401", "403", "500"):
            assert responses[status]["content"]["application/json"]["schema"] == error_ref, (
                method,
                path,
                status,
            )
    assert "HTTPValidationError" not in document["components"]["schemas"]
    body = document["components"]["schemas"]["ErrorBody"]
    assert set(body["required"]) == {
        "errorCode",
        "message",
        "timestamp",
        "xTransactionId",
        "errors",
    }
    create = document["components"]["schemas"]["WebhookCreate"]
    assert set(create["required"]) == {"targetUrl", "eventType"}
    assert document["paths"]["/webhook/v1/{id}"]["delete"]["responses"]["204"]
    # Client credentials may come in the form or as HTTP Basic: only the grant type is required.
    token_form = document["paths"]["/oauth/v1/token"]["post"]["requestBody"]["content"]
    assert token_form["application/x-www-form-urlencoded"]["schema"]["required"] == ["grant_type"]
    readiness = document["paths"]["/health"]["get"]["responses"]
    assert readiness["503"]["content"]["application/json"]["schema"] == error_ref


async def test_every_authenticated_operation_documents_its_429_with_retry_after(
    service: RunningService,
) -> None:
    document = (await service.http.get("/openapi.json")).json()
    authenticated = 0
    for method, path in EXPECTED_OPERATIONS:
        responses = document["paths"][path][method]["responses"]
        if "401" not in responses:
            continue
        authenticated += 1
        too_many = responses["429"]
        assert too_many["headers"]["Retry-After"] == {"$ref": "#/components/headers/RetryAfter"}
        expected = "OAuthError" if path == "/oauth/v1/token" else "ErrorBody"
        schema = too_many["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{expected}"}, path
    assert authenticated >= 10


async def test_every_operation_on_the_database_documents_its_503_and_every_answer_its_id(
    service: RunningService,
) -> None:
    document = (await service.http.get("/openapi.json")).json()
    headers = document["components"]["headers"]
    for method, path in EXPECTED_OPERATIONS | {("get", "/checkout/{linkPaymentUuid}")}:
        responses = document["paths"][path][method]["responses"]
        unavailable = responses["503"]
        assert unavailable["headers"]["Retry-After"] == {"$ref": "#/components/headers/RetryAfter"}
        expected = "OAuthError" if path == "/oauth/v1/token" else "ErrorBody"
        for status in ("500", "503"):
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": f"#/components/schemas/{expected}"}, (path, status)
        for status, answer in responses.items():
            assert answer["headers"]["x-transaction-id"] == {
                "$ref": "#/components/headers/TransactionId"
            }, (path, status)
        if "401" in responses:
            assert "WWW-Authenticate" in responses["401"]["headers"]
    assert set(headers) == {"TransactionId", "RetryAfter", "WWWAuthenticate"}
    assert "503" not in document["paths"]["/health/live"]["get"]["responses"]
    oauth_codes = document["components"]["schemas"]["OAuthError"]["properties"]["error"]["enum"]
    assert {"server_error", "temporarily_unavailable"} <= set(oauth_codes)


async def test_a_time_range_bound_is_documented_as_a_timestamp_or_a_date(
    service: RunningService,
) -> None:
    """The service takes a bare date as the whole day: a client checking the document sends
    one too."""
    document = (await service.http.get("/openapi.json")).json()
    both = [{"type": "string", "format": "date-time"}, {"type": "string", "format": "date"}]
    for path in ("/webhook/v1/list/results", "/payment-link/v1/link-payment"):
        for parameter in document["paths"][path]["get"]["parameters"]:
            if parameter["name"] in ("startDate", "endDate"):
                options = parameter["schema"]["anyOf"]
                assert [o for o in options if o != {"type": "null"}] == both, (path, parameter)
                assert "day" in parameter["description"]


@pytest.mark.parametrize(
    ("page", "asset"), [("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc")]
)
async def test_the_docs_load_nothing_from_elsewhere(
    service: RunningService, page: str, asset: str
) -> None:
    response = await service.http.get(page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    loaded = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', response.text)
    assert loaded and all(url.startswith("/") for url in loaded), loaded  # no CDN, no fonts
    assert not re.search(r"https?://", response.text.replace("http://www.w3.org", ""))
    assert any(asset in url for url in loaded)
    for url in loaded:
        answer = await service.http.get(url)
        assert answer.status_code == 200, url
        assert len(answer.content) > 1000, url


async def test_the_root_says_what_the_service_is_and_where_its_docs_are(
    service: RunningService, production_service: RunningService
) -> None:
    index = (await service.http.get("/")).json()
    assert index["service"] == "Tucano" and index["environment"] == "sandbox"
    assert index["links"] == {
        "docs": "/docs",
        "redoc": "/redoc",
        "openapi": "/openapi.json",
        "health": "/health",
        "liveness": "/health/live",
        "readiness": "/health/ready",
    }
    for link in index["links"].values():
        assert (await service.http.get(link)).status_code == 200, link
    # Production keeps its docs to itself unless TUCANO_DOCS_ENABLED says otherwise.
    quiet = (await production_service.http.get("/")).json()
    assert quiet["links"] == {
        "health": "/health",
        "liveness": "/health/live",
        "readiness": "/health/ready",
    }
    for hidden in ("/docs", "/redoc", "/openapi.json", "/docs/assets/swagger-ui.css"):
        assert (await production_service.http.get(hidden)).status_code == 404, hidden


async def test_docs_can_be_switched_on_in_production_and_off_in_sandbox(
    database_url: str, database: Database
) -> None:
    for environment, enabled, status in (("production", True, 200), ("sandbox", False, 404)):
        running = await start_service(
            make_settings(database_url, environment=environment, docs_enabled=enabled), database
        )
        try:
            for path in ("/docs", "/redoc", "/openapi.json"):
                assert (await running.http.get(path)).status_code == status, (environment, path)
        finally:
            await running.stop()


async def test_every_event_payload_is_documented_in_the_webhooks_section(
    service: RunningService,
) -> None:
    document = (await service.http.get("/openapi.json")).json()
    webhooks = document["webhooks"]
    assert set(webhooks) == {
        "PIX_OUTBOUND",
        "PIX_QR_INBOUND",
        "PIX_QR_PARTNER_INBOUND",
        "CARD_PAYMENT_INBOUND",
        "CARD_CHARGEBACK",
        "CARD_RECURRING_INBOUND",
        "PAYMENT_LINK_INBOUND",
    }
    schemas = document["components"]["schemas"]
    link = webhooks["PAYMENT_LINK_INBOUND"]["post"]
    ref = link["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    paid = schemas[ref.rsplit("/", 1)[1]]
    assert {
        "paymentLinkUuid",
        "paymentDate",
        "paymentMethod",
        "paymentId",
        "paymentReceipt",
        "amount",
        "userReference",
        "numbersInstallments",
        "status",
    } <= set(paid["properties"])
    assert "webhook-signature" in link["description"]
    results = document["paths"]["/webhook/v1/list/results"]["get"]
    assert {p["name"] for p in results["parameters"]} >= {
        "eventType",
        "webhookId",
        "status",
        "startDate",
        "endDate",
        "page",
        "size",
    }


def _examples(document: dict[str, Any], event_type: str) -> dict[str, Any]:
    body = document["webhooks"][event_type]["post"]["requestBody"]["content"]
    return dict(body["application/json"]["examples"])


async def test_every_variant_of_an_event_is_an_example_that_its_model_validates(
    service: RunningService,
) -> None:
    # Parsed as written: a number with a fraction as the Decimal its digits say.
    document = json_codec.loads((await service.http.get("/openapi.json")).content)
    for event_type in EventType:
        examples = _examples(document, event_type.value)
        assert examples, event_type
        for name, example in examples.items():
            assert example["summary"], (event_type, name)
            payload = example["value"]
            PAYLOAD_MODELS[event_type].model_validate(payload)
            for key, value in [*payload.items(), *payload.get("refund", {}).items()]:
                if key.lower().endswith("amount"):
                    assert isinstance(value, Decimal), (event_type, name, key)
                    assert value.as_tuple().exponent == -2, (event_type, name, key, value)
                if key.endswith("Date") and value is not None:
                    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", value), value

    link = [e["value"] for e in _examples(document, "PAYMENT_LINK_INBOUND").values()]
    assert {payload["status"] for payload in link} == set(get_args(LinkEventStatus))
    for payload in link:
        # A link that expired or was cancelled was never paid: its event has no payment.
        unpaid = payload["status"] in ("EXPIRED", "CANCELLED")
        assert unpaid != ("paymentReceipt" in payload), payload
        if payload["status"] in ("REFUNDED", "PARTIALLY_REFUNDED"):
            assert {"refund", "refundedAmount", "statusDate"} <= set(payload), payload
    (failed,) = [p for p in link if p.get("refund", {}).get("status") == "FAILED"]
    assert failed["status"] in ("PAID", "PARTIALLY_REFUNDED")
    assert failed["refund"]["failureReason"]
    for refunded in ("REFUNDED", "PARTIALLY_REFUNDED"):
        assert any(
            p["status"] == refunded and p["refund"]["status"] == "SUCCEEDED" for p in link
        ), refunded

    for event_type in ("PIX_QR_INBOUND", "PIX_QR_PARTNER_INBOUND"):
        pix = {name: e["value"] for name, e in _examples(document, event_type).items()}
        assert {name: p["type"] for name, p in pix.items()} == {
            "PAYMENT": "PAYMENT",
            "REFUND": "REFUND",
        }
        assert pix["PAYMENT"]["devolutionEndToEndId"] is None
        devolution = pix["REFUND"]["devolutionEndToEndId"]
        assert devolution.startswith("D") and is_valid_end_to_end_id(devolution)


async def test_every_amount_is_documented_as_the_json_number_it_is(
    service: RunningService,
) -> None:
    schemas = (await service.http.get("/openapi.json")).json()["components"]["schemas"]
    amounts = {
        (name, field): spec
        for name, schema in schemas.items()
        for field, spec in schema.get("properties", {}).items()
        if field.lower().endswith("amount") or field == "amountInstallment"
    }
    assert ("PaymentLinkOut", "amount") in amounts and ("PaymentLinkCreate", "amount") in amounts
    # A refund's amount is optional (all that is left), else read as a link's is.
    refund_amount = amounts.pop(("RefundCreate", "amount"))["anyOf"]
    assert refund_amount[-1] == {"type": "null"}
    assert refund_amount[0]["anyOf"] == amounts[("PaymentLinkCreate", "amount")]["anyOf"]
    # Sent: a number, or a string in plain decimal notation, as the service accepts them.
    number, text = amounts.pop(("PaymentLinkCreate", "amount"))["anyOf"]
    assert number == {
        "type": "number",
        "format": "decimal",
        "x-decimal-places": 2,
        "minimum": 0.01,
        "maximum": 999999999.99,
    }
    assert text["type"] == "string"
    assert re.fullmatch(text["pattern"], "10.50") and re.fullmatch(text["pattern"], "999999999.99")
    # What the service refuses, the document does not offer (fuzz audit: it offered these).
    for refused in ("1e3", "-5", "1.001", "1234567890"):
        assert not re.search(text["pattern"], refused), refused
    for where, spec in amounts.items():
        assert spec.get("type") == "number", (where, spec)
        # Exact decimals with two places, which a generated client cannot tell from a number.
        assert (spec.get("format"), spec.get("x-decimal-places")) == ("decimal", 2), where
        # A validator in binary floats finds 4596.07 no multiple of 0.01: it would refuse it.
        assert "multipleOf" not in spec, (where, spec)


def _references(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _references(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _references(value)]
    return []


async def test_every_reference_in_the_document_resolves(service: RunningService) -> None:
    document = (await service.http.get("/openapi.json")).json()
    references = set(_references(document))
    assert "#/components/schemas/ErrorBody" in references
    for reference in references:
        target: object = document
        for part in reference.removeprefix("#/").split("/"):
            assert isinstance(target, dict) and part in target, reference
            target = target[part]


def _schemas(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "type" in node:
            yield node
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


async def test_parameters_say_what_the_service_enforces(service: RunningService) -> None:
    # A client generated from the document must not send what the service refuses.
    document = (await service.http.get("/openapi.json")).json()
    for schema in _schemas(document):
        assert not {"ge", "le", "gt", "lt"} & set(schema), schema  # JSON Schema's names only

    def parameter(method: str, path: str, name: str) -> dict[str, Any]:
        (found,) = [p for p in document["paths"][path][method]["parameters"] if p["name"] == name]
        return dict(found)

    # The token endpoint's limits answer the OAuth way; every other operation's, the error body.
    token = document["paths"]["/oauth/v1/token"]["post"]["responses"]
    create = document["paths"]["/webhook/v1/create"]["post"]["responses"]
    for status in ("408", "413", "431"):
        assert token[status]["content"] == token["400"]["content"], status
        assert create[status]["content"] == create["400"]["content"], status
    assert "OAuthError" in str(token["408"]) and "ErrorBody" in str(create["408"])
    # Any integer is taken (one that names no webhook is a 404), so no bounds are published.
    webhook_id = parameter("get", "/webhook/v1/{id}", "id")["schema"]
    assert webhook_id["type"] == "integer" and "minimum" not in webhook_id
    size = parameter("get", "/webhook/v1/list", "size")["schema"]
    assert (size["minimum"], size["maximum"]) == (1, 100)
    for method, path in (
        ("post", "/payment-link/v1"),
        ("get", "/payment-link/v1/link-payment"),
        ("get", "/payment-link/v1/{linkPaymentUuid}"),
        ("get", "/payment-link/v1/report"),
    ):
        transaction = parameter(method, path, "x-transaction-id")
        assert transaction["required"] is True
        header = transaction["schema"]
        assert header["type"] == "string" and "format" not in header  # see the next test
        assert re.fullmatch(header["pattern"], "4f3c9b4e-8f5a-4c1e-9a53-2f1d2b6c7e10")
        assert not re.fullmatch(header["pattern"], "4f3c9b4e8f5a4c1e9a532f1d2b6c7e10")
    assert parameter("get", "/webhook/v1/list", "x-transaction-id")["required"] is False
    sort = parameter("get", "/payment-link/v1/link-payment", "sort")["schema"]
    (items,) = [option["items"] for option in sort["anyOf"] if option["type"] == "array"]
    pattern = re.compile(items["pattern"])
    for accepted in ("amount", "status,desc", "payerName,ASC", "creationDate,"):
        assert pattern.match(accepted), accepted
    for refused in ("", "amount,up", "id,asc"):
        assert not pattern.match(refused), refused


def _integer_schemas(node: object) -> list[dict[str, object]]:
    if isinstance(node, dict):
        found = [node] if node.get("type") == "integer" else []
        return found + [s for value in node.values() for s in _integer_schemas(value)]
    if isinstance(node, list):
        return [s for value in node for s in _integer_schemas(value)]
    return []


async def test_the_document_states_limits_as_the_service_enforces_them(
    service: RunningService,
) -> None:
    document = (await service.http.get("/openapi.json")).json()
    # Integers' bounds are integers: 2**63 - 1 written as a float would read 2**63.
    for schema in _integer_schemas(document):
        for bound in ("minimum", "maximum"):
            assert type(schema.get(bound, 0)) is int, schema
    partner = document["components"]["schemas"]["WebhookCreate"]["properties"]["partnerId"]
    assert partner["anyOf"][0]["maximum"] == 2**63 - 1
    # Schemes are read regardless of case, as the service reads them.
    target = document["components"]["schemas"]["WebhookCreate"]["properties"]["targetUrl"]
    assert re.search(target["pattern"], "HTTPS://example.com/")
    # The body limit applies to every request.
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert "413" in operation["responses"], (method, path)


OPERATION_IDS = {
    ("post", "/oauth/v1/token"): "issueToken",
    ("get", "/webhook/v1/list"): "listWebhooks",
    ("post", "/webhook/v1/create"): "createWebhook",
    ("get", "/webhook/v1/{id}"): "getWebhook",
    ("put", "/webhook/v1/{id}"): "updateWebhook",
    ("delete", "/webhook/v1/{id}"): "deleteWebhook",
    ("get", "/webhook/v1/{id}/secret"): "getWebhookSecret",
    ("post", "/webhook/v1/{id}/secret/rotate"): "rotateWebhookSecret",
    ("get", "/webhook/v1/{id}/delivery-status"): "getWebhookDeliveryStatus",
    ("post", "/webhook/v1/{id}/redeliver"): "redeliverEvent",
    ("post", "/webhook/v1/{id}/recover"): "recoverWebhookDeliveries",
    ("get", "/webhook/v1/list/results"): "listWebhookResults",
    ("post", "/webhook/v1/test-events"): "sendTestEvent",
    ("post", "/internal/v1/events"): "publishEvent",
    ("post", "/internal/v1/events/batch"): "publishEventBatch",
    ("post", "/payment-link/v1"): "createPaymentLink",
    ("get", "/payment-link/v1/link-payment"): "listPaymentLinks",
    ("get", "/payment-link/v1/report"): "getPaymentLinkReport",
    ("get", "/payment-link/v1/{linkPaymentUuid}"): "getPaymentLink",
    ("post", "/payment-link/v1/{linkPaymentUuid}/cancel"): "cancelPaymentLink",
    ("post", "/payment-link/v1/{linkPaymentUuid}/refunds"): "refundPaymentLink",
    ("get", "/payment-link/v1/{linkPaymentUuid}/refunds"): "listPaymentLinkRefunds",
    ("get", "/checkout/{linkPaymentUuid}"): "getCheckoutPage",
    ("get", "/checkout/{linkPaymentUuid}/status"): "getCheckoutStatus",
    ("post", "/checkout/{linkPaymentUuid}/card"): "payCheckoutByCard",
    ("get", "/checkout/{linkPaymentUuid}/card"): "returnFromCheckoutCardForm",
    ("post", "/checkout/{linkPaymentUuid}/pix/simulate"): "simulateCheckoutPixPayment",
    ("get", "/checkout/{linkPaymentUuid}/pix/simulate"): "returnFromCheckoutPixSimulation",
    ("post", "/pix-provider/v1/webhook/pix"): "receivePspPix",
    ("post", "/portal/v1/sessions"): "createPortalSession",
    ("get", "/health/live"): "getLiveness",
    ("get", "/health"): "getHealth",
    ("get", "/health/ready"): "getReadiness",
    ("get", "/metrics"): "getMetrics",
    ("get", "/"): "getServiceIndex",
}


async def test_every_operation_has_its_stable_camel_case_id(service: RunningService) -> None:
    """Generated clients name their methods after these: they are part of the interface."""
    document = (await service.http.get("/openapi.json")).json()
    found = {
        (method, path): operation["operationId"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }
    assert found == OPERATION_IDS
    deliveries = {
        name: operation["operationId"]
        for name, item in document["webhooks"].items()
        for operation in item.values()
    }
    assert deliveries["PAYMENT_LINK_INBOUND"] == "receivePaymentLinkInbound"
    assert deliveries["PIX_QR_INBOUND"] == "receivePixQrInbound"
    assert len(set(deliveries.values())) == 7


async def test_timestamps_amounts_and_health_answers_say_what_they_are(
    service: RunningService,
) -> None:
    document = (await service.http.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    timestamps = [
        ("PaymentLinkOut", "creationDate"),
        ("PaymentLinkOut", "expirationDate"),
        ("LinkPayment", "paymentDate"),
        ("WebhookResult", "attemptedAt"),
        ("EventAccepted", "createdAt"),
        ("ErrorBody", "timestamp"),
        ("PaymentLinkReport", "startDate"),
    ]
    for model, field in timestamps:
        assert schemas[model]["properties"][field]["format"] == "date-time", (model, field)
    nullable = schemas["WebhookResult"]["properties"]["nextAttemptAt"]["anyOf"]
    assert {"type": "string", "format": "date-time", "example": "2026-01-15T10:30:00.000Z"} in (
        nullable
    )
    for model, field in [
        ("PaymentLinkOut", "amount"),
        ("InstallmentOption", "amountInstallment"),
        ("PaymentLinkReport", "totalAmount"),
        ("LinkPayment", "amount"),
    ]:
        amount = schemas[model]["properties"][field]
        assert (amount["type"], amount["format"], amount["x-decimal-places"]) == (
            "number",
            "decimal",
            2,
        ), (model, field)
        assert "multipleOf" not in amount  # binary-float validators refuse real amounts with it
    assert schemas["DayTotal"]["properties"]["date"]["format"] == "date"
    readiness_503 = document["paths"]["/health"]["get"]["responses"]["503"]
    assert readiness_503["headers"]["Retry-After"] == {"$ref": "#/components/headers/RetryAfter"}
    ready_503 = document["paths"]["/health/ready"]["get"]["responses"]["503"]
    assert ready_503["headers"]["Retry-After"] == {"$ref": "#/components/headers/RetryAfter"}
    for path, model in (
        ("/health/live", "Liveness"),
        ("/health", "Readiness"),
        ("/health/ready", "SchemaReadiness"),
    ):
        answer = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        assert answer["schema"] == {"$ref": f"#/components/schemas/{model}"}
        assert "status" in schemas[model]["required"]
