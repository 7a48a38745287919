"""GET /metrics: the Prometheus text format (decisions.md, "Operations endpoints")."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tucano.api.dependencies import error_responses
from tucano.api.deps import DatabaseDep, SettingsDep
from tucano.api.errors import error_response
from tucano.core.errors import ErrorCode
from tucano.metrics.exposition import CONTENT_TYPE, METRICS_PATH, may_scrape, metrics_page

router = APIRouter(tags=["operations"])


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
async def metrics(request: Request, settings: SettingsDep, database: DatabaseDep) -> Response:
    authorization = request.headers.get("authorization")
    if not may_scrape(settings, None if authorization is None else authorization.encode("latin-1")):
        return error_response(ErrorCode.ROUTE_NOT_FOUND, request.state.transaction_id)
    body = await metrics_page(database, settings)
    return Response(body, media_type=None, headers={"Content-Type": CONTENT_TYPE})
