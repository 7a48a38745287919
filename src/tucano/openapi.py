"""The OpenAPI document: FastAPI's, with what the framework cannot say of Tucano's interface (the
one error body for every error, the event deliveries in the `webhooks` section, parameters' rules,
integer bounds), and the operation ids that are part of the interface."""

from __future__ import annotations

import inspect
import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from fastapi.utils import generate_unique_id
from starlette.responses import Response

from tucano.api.dependencies import REQUIRED_TRANSACTION_ID_DESCRIPTION
from tucano.api.errors import ErrorBody
from tucano.core import json_codec
from tucano.events.payloads import PAYLOAD_MODELS, published
from tucano.events.samples import VARIANT_SUMMARIES, VARIANTS, sample_payload
from tucano.events.types import EventType
from tucano.payment_links.filters import SORTABLE
from tucano.webhooks.schemas import MAX_ID

# Every operation's id, part of the interface: generated clients name their methods after them
# (a change renames a method in every client). A route missing here gets FastAPI's long id, and
# tests/test_openapi.py, which holds the whole table, fails.
OPERATION_IDS = {
    "POST /oauth/v1/token": "issueToken",
    "GET /webhook/v1/list": "listWebhooks",
    "POST /webhook/v1/create": "createWebhook",
    "GET /webhook/v1/{id}": "getWebhook",
    "PUT /webhook/v1/{id}": "updateWebhook",
    "DELETE /webhook/v1/{id}": "deleteWebhook",
    "GET /webhook/v1/{id}/secret": "getWebhookSecret",
    "POST /webhook/v1/{id}/secret/rotate": "rotateWebhookSecret",
    "GET /webhook/v1/{id}/delivery-status": "getWebhookDeliveryStatus",
    "POST /webhook/v1/{id}/redeliver": "redeliverEvent",
    "POST /webhook/v1/{id}/recover": "recoverWebhookDeliveries",
    "GET /webhook/v1/list/results": "listWebhookResults",
    "POST /webhook/v1/test-events": "sendTestEvent",
    "POST /internal/v1/events": "publishEvent",
    "POST /internal/v1/events/batch": "publishEventBatch",
    "POST /payment-link/v1": "createPaymentLink",
    "GET /payment-link/v1/link-payment": "listPaymentLinks",
    "GET /payment-link/v1/report": "getPaymentLinkReport",
    "GET /payment-link/v1/{linkPaymentUuid}": "getPaymentLink",
    "POST /payment-link/v1/{linkPaymentUuid}/cancel": "cancelPaymentLink",
    "POST /payment-link/v1/{linkPaymentUuid}/refunds": "refundPaymentLink",
    "GET /payment-link/v1/{linkPaymentUuid}/refunds": "listPaymentLinkRefunds",
    "GET /checkout/{linkPaymentUuid}": "getCheckoutPage",
    "GET /checkout/{linkPaymentUuid}/status": "getCheckoutStatus",
    "POST /checkout/{linkPaymentUuid}/card": "payCheckoutByCard",
    "GET /checkout/{linkPaymentUuid}/card": "returnFromCheckoutCardForm",
    "POST /checkout/{linkPaymentUuid}/pix/simulate": "simulateCheckoutPixPayment",
    "GET /checkout/{linkPaymentUuid}/pix/simulate": "returnFromCheckoutPixSimulation",
    "POST /pix-provider/v1/webhook/pix": "receivePspPix",
    "POST /portal/v1/sessions": "createPortalSession",
    "GET /health/live": "getLiveness",
    "GET /health": "getHealth",
    "GET /health/ready": "getReadiness",
    "GET /metrics": "getMetrics",
    "GET /": "getServiceIndex",
}


def operation_id(route: APIRoute) -> str:
    """The operation's id in OPERATION_IDS (FastAPI's generate_unique_id_function)."""
    method = sorted((route.methods or set()) - {"HEAD"})[0]
    return OPERATION_IDS.get(f"{method} {route.path_format}") or generate_unique_id(route)


def delivery_operation_id(event_type: EventType) -> str:
    """`receivePixQrInbound` for PIX_QR_INBOUND: what a receiver of that event implements."""
    return "receive" + "".join(word.capitalize() for word in event_type.value.split("_"))


UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# Operations that never answer 503: without the database, or (/metrics) leaving out what it
# would have read there.
_WITHOUT_DATABASE = frozenset({"/health/live", "/metrics"})


DELIVERY_DESCRIPTION = """\
Tucano POSTs this body to every active webhook of the customer registered for `{event_type}`.

Headers ([Standard Webhooks](https://www.standardwebhooks.com/)): `webhook-id` (the event id, the
same on every retry: use it to ignore duplicates), `webhook-timestamp` (Unix seconds of this
attempt), `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{{id}}.{{timestamp}}.{{body}}">` keyed
with the webhook's secret; after a rotation, one more space-separated signature for each replaced
secret still in its 24-hour grace (at most nine), the current secret's first: accept the
delivery if any of them verifies), `content-type: application/json`, `x-event-type`,
`user-agent: Tucano-Webhooks/...`.

Answer any 2xx within 15 seconds. Anything else (or a redirect, or no answer) is retried on
`TUCANO_RETRY_SCHEDULE` (default 5s, 5m, 30m, 2h, 5h, 10h, 10h, with jitter); `Retry-After` on
429/503 is honoured up to an hour.
"""


# The examples' moment and amount: fixed, so that the document is the same on every start. The
# amount's last cent is not zero: the document is written with floats, where 10.50 reads 10.5.
EXAMPLE_TIME = datetime(2026, 1, 15, 13, 30, 0, 123000, tzinfo=UTC)
EXAMPLE_AMOUNT = Decimal("1549.87")
_ONLY_SAMPLE = "What POST /webhook/v1/test-events sends for this event type."


def payload_examples(event_type: EventType) -> dict[str, dict[str, Any]]:
    """The OpenAPI `examples` of an event's body: one per variant of its samples (one for a type
    with none), each a sandbox test event's payload as its deliveries send it."""
    examples: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS.get(event_type, (None,)):
        name = variant or "sample"
        payload = sample_payload(
            event_type,
            variant=variant,
            partner_id=12,
            rng=random.Random(f"{event_type.value} {name}"),
            at=EXAMPLE_TIME,
            amount=EXAMPLE_AMOUNT,
        )
        examples[name] = {
            "summary": VARIANT_SUMMARIES[variant] if variant else _ONLY_SAMPLE,
            "value": orjson.loads(json_codec.dumps(published(payload))),
        }
    return examples


def document_deliveries(app: FastAPI) -> None:
    """One entry per event type in the OpenAPI `webhooks` section, with its payload schema."""
    for event_type in EventType:
        model = PAYLOAD_MODELS[event_type]

        async def receive(body: Any) -> None:  # pragma: no cover - documentation only
            return None

        receive.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model)],
            return_annotation=None,
        )
        app.webhooks.add_api_route(
            event_type.value,
            receive,
            methods=["POST"],
            operation_id=delivery_operation_id(event_type),
            summary=f"{event_type.value}: {(model.__doc__ or '').strip()}",
            description=DELIVERY_DESCRIPTION.format(event_type=event_type.value),
            tags=["events delivered to your webhooks"],
            response_class=Response,
            responses={200: {"description": "Any 2xx acknowledges the delivery."}},
        )


# The sort parameter's values, as the payment-link list reads them (link_filters.parse_sort).
_SORT_PATTERN = (
    r"^\s*(" + "|".join(sorted(SORTABLE)) + r")\s*(,\s*([aA][sS][cC]|[dD][eE][sS][cC])?\s*)?$"
)
# Bounds that pydantic leaves under its own names when a validator runs before them (integers
# in paths and queries are checked as plain digits first): JSON Schema's names for them.
_BOUND_NAMES = {
    "ge": "minimum",
    "le": "maximum",
    "gt": "exclusiveMinimum",
    "lt": "exclusiveMaximum",
}


def _document_parameter(parameter: dict[str, Any]) -> None:
    """What the framework cannot say of a parameter from its declaration."""
    if parameter.get("description") == REQUIRED_TRANSACTION_ID_DESCRIPTION:
        parameter["required"] = True
        # A string with the UUID's pattern, not `format: uuid`: generated clients then take the
        # text a caller makes with uuid4() as it is (one generator typed it uuid.UUID and failed
        # to send it as a header); the server still refuses anything but a UUID.
        parameter["schema"] = {
            "type": "string",
            "pattern": UUID_PATTERN,
            "minLength": 36,
            "maxLength": 36,
            "example": "4f3c9b4e-8f5a-4c1e-9a53-2f1d2b6c7e10",
            "description": REQUIRED_TRANSACTION_ID_DESCRIPTION,
        }
    elif parameter.get("name") == "sort" and parameter.get("in") == "query":
        for option in parameter["schema"].get("anyOf", [parameter["schema"]]):
            if option.get("type") == "array":
                option["items"] = {**option.get("items", {}), "pattern": _SORT_PATTERN}


def _standard_bounds(node: Any) -> None:
    if isinstance(node, dict):
        if "type" in node:
            for name, standard in _BOUND_NAMES.items():
                if isinstance(node.get(name), int | float) and standard not in node:
                    node[standard] = node.pop(name)
            if node["type"] == "integer":
                _integer_bounds(node)
        for value in node.values():
            _standard_bounds(value)
    elif isinstance(node, list):
        for value in node:
            _standard_bounds(value)


def _integer_bounds(node: dict[str, Any]) -> None:
    """FastAPI's OpenAPI model reads every bound as a binary float: an integer's bounds back to
    integers, and MAX_ID (2**63 - 1, which as a float is 2**63) back to itself."""
    for name in _BOUND_NAMES.values():
        bound = node.get(name)
        if isinstance(bound, float) and bound.is_integer():
            node[name] = MAX_ID if bound == float(MAX_ID) else int(bound)


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the framework's 422 replaced by our 400 error body."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        webhooks=app.webhooks.routes,
        tags=app.openapi_tags,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    components["ErrorBody"] = ErrorBody.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    error_ref = {
        "description": "Invalid body, parameter or header.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    too_large = {
        "description": "Body larger than 1 MiB (the limit applies to every request).",
        "content": error_ref["content"],
    }
    too_slow = {
        "description": "The body was still arriving when its time ran out "
        "(TUCANO_REQUEST_BODY_TIMEOUT_SECONDS, 60 by default); the connection is closed.",
        "content": error_ref["content"],
    }
    too_many_headers = {
        "description": "Request headers over 32 KiB, names and values together.",
        "content": error_ref["content"],
    }
    unexpected = {"description": "Unexpected system error.", "content": error_ref["content"]}
    unavailable = {
        "description": "The database cannot be used just now; retry after `Retry-After` seconds.",
        "headers": {"Retry-After": {"$ref": "#/components/headers/RetryAfter"}},
        "content": error_ref["content"],
    }
    too_many = {
        "description": "The API client is over its rate limit (TUCANO_RATE_LIMIT); retry "
        "after `Retry-After` seconds.",
        "content": error_ref["content"],
    }
    schema["components"]["headers"] = {
        "TransactionId": {
            "description": "The request's x-transaction-id, or one generated for it.",
            "schema": {"type": "string"},
        },
        "RetryAfter": {"description": "Seconds to wait.", "schema": {"type": "integer"}},
        "WWWAuthenticate": {
            "description": "The authentication scheme expected (RFC 9110 11.6.1).",
            "schema": {"type": "string"},
        },
    }
    for path, path_item in schema.get("paths", {}).items():
        for operation in path_item.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None and "400" not in responses:
                responses["400"] = error_ref
            # The token endpoint answers these the OAuth way, in the body of its 400.
            oauth = responses["400"]["content"] if path.startswith("/oauth/") else None
            responses.setdefault("413", too_large)
            responses.setdefault("431", too_many_headers)
            if "requestBody" in operation:
                responses.setdefault("408", too_slow)
            responses.setdefault("500", unexpected)
            if "401" in responses:
                responses.setdefault("429", too_many)
            if "429" in responses:
                responses["429"] = {
                    **responses["429"],
                    "headers": {
                        **responses["429"].get("headers", {}),
                        "Retry-After": {"$ref": "#/components/headers/RetryAfter"},
                    },
                }
            if path not in _WITHOUT_DATABASE:
                responses.setdefault("503", unavailable)
                # Every 503 says when to retry, one an operation documents itself too.
                responses["503"]["headers"] = {
                    **responses["503"].get("headers", {}),
                    "Retry-After": {"$ref": "#/components/headers/RetryAfter"},
                }
            if oauth is not None:
                for status in ("408", "413", "431", "500", "503"):
                    responses[status] = {**responses[status], "content": oauth}
            for status, answer in responses.items():
                headers = answer["headers"] = dict(answer.get("headers", {}))
                headers["x-transaction-id"] = {"$ref": "#/components/headers/TransactionId"}
                if status == "401":
                    headers["WWW-Authenticate"] = {"$ref": "#/components/headers/WWWAuthenticate"}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []):
                _document_parameter(parameter)
    _standard_bounds(schema)
    # The events Tucano sends: the receiver answers, so no error body of ours belongs there.
    # Their examples are set here, after FastAPI's encoder, which would drop their nulls.
    for name, path_item in schema.get("webhooks", {}).items():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
            body = operation["requestBody"]["content"]["application/json"]
            body["examples"] = payload_examples(EventType(name))
    app.openapi_schema = schema
    return schema
