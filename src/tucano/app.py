"""create_app(): the FastAPI application with its routers, error handling and lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from sqlalchemy import text
from starlette.responses import Response

import tucano
from tucano.auth.router import router as auth_router
from tucano.auth.service import resolve_secret_key
from tucano.auth.tokens import derive_key
from tucano.config import Settings, load_settings
from tucano.db import Database
from tucano.edge import EdgeMiddleware
from tucano.errors import ErrorBody, ErrorCode, error_response, install_error_handlers
from tucano.webhooks.router import router as webhooks_router
from tucano.wire import json_response

DESCRIPTION = """\
Tucano is a payments API for Brazil.

* **Webhooks** (`/webhook/v1`): register target URLs per event type; Tucano POSTs each event,
  signed per Standard Webhooks, retried until delivered.
* **Authentication**: `POST /oauth/v1/token` with client credentials gives a bearer token.

Every error has one body: `errorCode`, `message`, `timestamp`, `xTransactionId`, `errors`.
"""


def create_app(settings: Settings | None = None, *, database: Database | None = None) -> FastAPI:
    """The application. The database must already be migrated (`tucano migrate`, or `tucano serve`
    which migrates first)."""
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = database or Database(settings.database_url)
        app.state.database = db
        secret_key = await resolve_secret_key(settings, db)
        app.state.access_token_key = derive_key(secret_key, "access-token")
        try:
            yield
        finally:
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
    app.add_middleware(EdgeMiddleware, max_body_bytes=settings.max_request_body_bytes)
    install_error_handlers(app)
    app.include_router(auth_router)
    app.include_router(webhooks_router)

    @app.get("/health", tags=["operations"], summary="Liveness and database readiness")
    async def health(request: Request) -> Response:
        try:
            async with request.app.state.database.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        except Exception:
            return error_response(
                ErrorCode.UNAVAILABLE,
                request.state.transaction_id,
                errors=["the database is not reachable"],
            )
        return json_response({"status": "ok", "environment": settings.environment.value})

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


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
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None and "400" not in responses:
                responses["400"] = error_ref
    app.openapi_schema = schema
    return schema
