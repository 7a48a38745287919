"""create_app(): the FastAPI application with its routers, error handling and lifespan."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from sqlalchemy import text
from starlette.responses import Response

import tucano
from tucano.auth.router import router as auth_router
from tucano.auth.service import RevokedClients, resolve_secret_key
from tucano.auth.tokens import derive_key
from tucano.background import run_background
from tucano.checkout.card_processor import CardProcessorError, load_card_processor
from tucano.checkout.csrf import KEY_PURPOSE as CSRF_KEY_PURPOSE
from tucano.checkout.rendering import CheckoutHeaders
from tucano.checkout.router import router as checkout_router
from tucano.config import ConfigurationError, Settings, load_settings
from tucano.db import Database
from tucano.deliveries.router import internal_router as events_router
from tucano.deliveries.router import router as deliveries_router
from tucano.edge import EdgeMiddleware
from tucano.errors import ErrorBody, ErrorCode, error_response, install_error_handlers
from tucano.http import REQUIRED_TRANSACTION_ID_DESCRIPTION, error_responses
from tucano.payment_links.checkout_tokens import KEY_PURPOSE as CHECKOUT_KEY_PURPOSE
from tucano.payment_links.router import router as payment_links_router
from tucano.payment_links.service import SORTABLE
from tucano.webhooks.events import EventType
from tucano.webhooks.payloads import PAYLOAD_MODELS
from tucano.webhooks.router import router as webhooks_router
from tucano.webhooks.schemas import MAX_ID
from tucano.wire import json_response

DESCRIPTION = """\
Tucano is a payments API for Brazil.

* **Webhooks** (`/webhook/v1`): register target URLs per event type; Tucano POSTs each event,
  signed per Standard Webhooks, and retries a failed delivery on `TUCANO_RETRY_SCHEDULE` (eight
  attempts over about a day by default) before giving it up as `EXHAUSTED`.
* **Payment links** (`/payment-link/v1`): create a link for a payer and an amount, list, read and
  report on links. `urlPayment` opens the link's checkout page, where the payer pays by PIX (QR
  code or copy-and-paste code) or by card in up to 10 instalments, and which then shows the
  receipt; the merchant hears of it by a `PAYMENT_LINK_INBOUND` webhook. In sandbox, a link
  whose amount ends in 01 cents is paid by PIX on its own, and test cards are accepted.
* **Authentication**: `POST /oauth/v1/token` with client credentials gives a bearer token.

Every error has one body: `errorCode`, `message`, `timestamp`, `xTransactionId`, `errors`.
"""


_SQLITE_HEALTH = "SELECT count(*) FROM sqlite_master"
# Operations that answer without the database (no 503 of theirs to document).
_WITHOUT_DATABASE = frozenset({"/health/live"})


def create_app(
    settings: Settings | None = None,
    *,
    database: Database | None = None,
    background: bool = True,
) -> FastAPI:
    """The application; with `background`, the delivery worker and periodic jobs run beside it.
    The database must already be migrated (`tucano migrate`, or `tucano serve`, which migrates)."""
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = database or Database(settings.database_url)
        app.state.database = db
        secret_key = await resolve_secret_key(settings, db)
        app.state.access_token_key = derive_key(secret_key, "access-token")
        app.state.checkout_key = derive_key(secret_key, CHECKOUT_KEY_PURPOSE)
        app.state.csrf_key = derive_key(secret_key, CSRF_KEY_PURPOSE)
        # Checkout tokens in links payers hold outlive a change of key; access tokens do not.
        app.state.checkout_keys = [
            app.state.checkout_key,
            *(
                derive_key(key.get_secret_value().encode(), CHECKOUT_KEY_PURPOSE)
                for key in settings.previous_secret_keys
            ),
        ]
        revoked = app.state.revoked_clients = RevokedClients()
        await revoked.refresh_at_start(db)
        stop = asyncio.Event()
        watch_revocations = asyncio.create_task(
            revoked.keep_fresh(db, stop), name="revoked-clients"
        )
        loops = (
            asyncio.create_task(run_background(db, settings, stop), name="background")
            if background
            else None
        )
        try:
            yield
        finally:
            # Requests in flight are done by now (uvicorn drains them before the lifespan ends).
            stop.set()
            await watch_revocations
            if loops is not None:
                await loops
            if database is None:
                await db.dispose()

    app = FastAPI(
        title="Tucano",
        version=tucano.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        redirect_slashes=False,
    )
    app.state.settings = settings
    try:
        app.state.card_processor = load_card_processor(settings)
    except CardProcessorError as exc:
        raise ConfigurationError(str(exc)) from None
    app.add_middleware(
        EdgeMiddleware,
        max_body_bytes=settings.max_request_body_bytes,
        body_timeout_seconds=settings.request_body_timeout_seconds,
    )
    # Outside the edge, so that the answers it makes itself carry them too.
    app.add_middleware(CheckoutHeaders, https=settings.public_url.startswith("https://"))
    install_error_handlers(app)
    app.include_router(auth_router)
    app.include_router(deliveries_router)
    app.include_router(webhooks_router)
    app.include_router(events_router)
    app.include_router(payment_links_router)
    app.include_router(checkout_router)
    _document_deliveries(app)

    @app.get("/health/live", tags=["operations"], summary="Liveness: the process answers")
    async def live() -> Response:
        return json_response({"status": "ok"})

    @app.get(
        "/health",
        tags=["operations"],
        summary="Readiness: the database answers",
        responses={
            200: {
                "description": "Ready.",
                "content": {
                    "application/json": {"example": {"status": "ok", "environment": "sandbox"}}
                },
            },
            **error_responses(503),
        },
    )
    async def health(request: Request) -> Response:
        try:
            # The read engine: on SQLite the writing connection waits for the write lock.
            database = request.app.state.database
            async with database.read_engine.connect() as connection:
                # On SQLite, a statement that reads the file (SELECT 1 reads nothing).
                await connection.execute(
                    text("SELECT 1" if database.dialect == "postgresql" else _SQLITE_HEALTH)
                )
        except Exception:
            return error_response(
                ErrorCode.UNAVAILABLE,
                request.state.transaction_id,
                errors=["the database is not reachable"],
                headers={"Retry-After": "1"},
            )
        return json_response({"status": "ok", "environment": settings.environment.value})

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


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


def _document_deliveries(app: FastAPI) -> None:
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
            summary=f"{event_type.value}: {(model.__doc__ or '').strip()}",
            description=DELIVERY_DESCRIPTION.format(event_type=event_type.value),
            tags=["events delivered to your webhooks"],
            response_class=Response,
            responses={200: {"description": "Any 2xx acknowledges the delivery."}},
        )


# The sort parameter's values, as the payment-link list reads them (service.parse_sort).
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
        parameter["schema"] = {
            "type": "string",
            "format": "uuid",
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


def _openapi(app: FastAPI) -> dict[str, Any]:
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
            if path not in _WITHOUT_DATABASE:
                responses.setdefault("503", unavailable)
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
    for path_item in schema.get("webhooks", {}).values():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
    app.openapi_schema = schema
    return schema
