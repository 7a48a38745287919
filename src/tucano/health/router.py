"""The health endpoints (decisions.md, "Operations endpoints"): liveness, the database health
of earlier releases, and readiness (the database answers and its schema is this release's)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from starlette.responses import Response

from tucano.api.dependencies import error_responses
from tucano.api.deps import DatabaseDep, SettingsDep
from tucano.api.errors import error_response
from tucano.api.wire import ApiModel
from tucano.config import Environment
from tucano.core.errors import ErrorCode
from tucano.core.logs import exception_summary
from tucano.db.health import check_database_answers, schema_revisions
from tucano.db.outages import is_database_unavailable
from tucano.migrations import revisions_problem

router = APIRouter(tags=["operations"])

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
async def live() -> Liveness:
    return Liveness(status="ok")


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
async def health(
    request: Request, database: DatabaseDep, settings: SettingsDep
) -> Readiness | Response:
    try:
        await check_database_answers(database)
    except Exception:
        return _unavailable(request, _UNREACHABLE)
    return Readiness(status="ok", environment=settings.environment)


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
                        "schemaRevision": "0020_portal_sessions",
                    }
                }
            },
        },
        **error_responses(503),
    },
)
async def ready(
    request: Request, database: DatabaseDep, settings: SettingsDep
) -> SchemaReadiness | Response:
    try:
        current = await schema_revisions(database)
    except Exception as exc:
        if is_database_unavailable(exc):
            return _unavailable(request, _UNREACHABLE)
        # Reached, but with no alembic_version table: never migrated.
        if "alembic_version" in exception_summary(exc):
            return _unavailable(request, revisions_problem(set()) or _UNREACHABLE)
        return _unavailable(request, _UNREACHABLE)
    if problem := revisions_problem(current):
        return _unavailable(request, problem)
    return SchemaReadiness(
        status="ok", environment=settings.environment, schema_revision=current.pop()
    )
