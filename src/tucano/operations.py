"""The operations endpoints (decisions.md, "Operations endpoints"): liveness, the database
health of earlier releases, readiness (the database answers and its schema is this release's),
and the Prometheus metrics."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from sqlalchemy import text
from starlette.responses import Response

from tucano.api.dependencies import error_responses
from tucano.api.errors import error_response
from tucano.api.wire import ApiModel, json_response
from tucano.config import Environment
from tucano.core.errors import ErrorCode
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.db.outages import is_database_unavailable
from tucano.metrics.exposition import CONTENT_TYPE, METRICS_PATH, may_scrape, metrics_page
from tucano.migrations import revisions_problem

router = APIRouter(tags=["operations"])

_SQLITE_HEALTH = "SELECT count(*) FROM sqlite_master"
# One statement that reaches the database and reads its schema's revision at once: as cheap as
# /health's, so nothing is cached, and a schema rolled back shows at the next probe.
_REVISIONS = text("SELECT version_num FROM alembic_version")
_UNREACHABLE = "the database is not reachable"


class Liveness(ApiModel):
    status: Literal["ok"]


class Readiness(ApiModel):
    status: Literal["ok"]
    environment: Environment


class SchemaReadiness(ApiModel):
    status: Literal["ok"]
    environment: Environment
    schema_revision: str  # the Alembic revision the database is at: this release's head


def _unavailable(request: Request, why: str) -> Response:
    return error_response(
        ErrorCode.UNAVAILABLE,
        request.state.transaction_id,
        errors=[why],
        headers={"Retry-After": "1"},
    )


@router.get(
    "/health/live",
    summary="Liveness: the process answers",
    response_model=Liveness,
)
async def live() -> Response:
    return json_response({"status": "ok"})


@router.get(
    "/health",
    summary="Database health: the database answers (readiness without the schema's check)",
    response_model=Readiness,
    responses={
        200: {
            "description": "The database answers.",
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
        return _unavailable(request, _UNREACHABLE)
    environment = request.app.state.settings.environment.value
    return json_response({"status": "ok", "environment": environment})


@router.get(
    "/health/ready",
    summary="Readiness: the database answers and its schema is this release's",
    response_model=SchemaReadiness,
    responses={
        200: {
            "description": "Ready to serve.",
            "content": {
                "application/json": {
                    "example": {
                        "status": "ok",
                        "environment": "sandbox",
                        "schemaRevision": "0016_secrets_at_rest",
                    }
                }
            },
        },
        **error_responses(503),
    },
)
async def ready(request: Request) -> Response:
    database: Database = request.app.state.database
    try:
        async with database.read_engine.connect() as connection:
            current = set((await connection.execute(_REVISIONS)).scalars())
    except Exception as exc:
        if is_database_unavailable(exc):
            return _unavailable(request, _UNREACHABLE)
        # Reached, but with no alembic_version table: never migrated.
        if "alembic_version" in exception_summary(exc):
            return _unavailable(request, revisions_problem(set()) or _UNREACHABLE)
        return _unavailable(request, _UNREACHABLE)
    if problem := revisions_problem(current):
        return _unavailable(request, problem)
    return json_response(
        {
            "status": "ok",
            "environment": request.app.state.settings.environment.value,
            "schemaRevision": current.pop(),
        }
    )


@router.get(
    METRICS_PATH,
    summary="Prometheus metrics (open in sandbox; the metrics token in production)",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text format (docs/operations.md lists the metrics).",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        404: {
            "model": error_responses(404)[404]["model"],
            "description": "In production: TUCANO_METRICS_TOKEN is unset, or the request did "
            "not carry it as `Authorization: Bearer <token>` (answered as a path of no route).",
        },
    },
)
async def metrics(request: Request) -> Response:
    authorization = request.headers.get("authorization")
    if not may_scrape(
        request.app.state.settings,
        None if authorization is None else authorization.encode("latin-1"),
    ):
        return error_response(ErrorCode.ROUTE_NOT_FOUND, request.state.transaction_id)
    body = await metrics_page(request.app.state.database)
    return Response(body, media_type=None, headers={"Content-Type": CONTENT_TYPE})
