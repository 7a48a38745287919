"""The worker's /metrics: `tucano worker` has no API, so with TUCANO_METRICS_PORT (or
--metrics-port) it serves this one page on an aiohttp server of its own (the worker runs
without the web framework), under the same rule as `tucano serve`'s: open in sandbox, the
bearer token in production, and otherwise the error body of a route that does not exist."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
from aiohttp import web

from tucano.config import Settings
from tucano.core.clock import clock, format_utc
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.metrics.exposition import CONTENT_TYPE, METRICS_PATH, may_scrape, metrics_page


def _not_found() -> web.Response:
    """The error body of decisions.md, as the API answers a path that is no route."""
    transaction_id = str(uuid.uuid4())
    code = ErrorCode.ROUTE_NOT_FOUND
    body = {
        "errorCode": int(code),
        "message": code.message,
        "timestamp": format_utc(clock.now()),
        "xTransactionId": transaction_id,
        "errors": [],
    }
    return web.Response(
        body=orjson.dumps(body),
        status=code.status,
        content_type="application/json",
        headers={"x-transaction-id": transaction_id, "Cache-Control": "no-store"},
    )


def metrics_application(settings: Settings, database: Database) -> web.Application:
    async def answer(request: web.Request) -> web.StreamResponse:
        authorization = request.headers.get("Authorization")
        allowed = may_scrape(
            settings, None if authorization is None else authorization.encode("latin-1")
        )
        if request.method not in ("GET", "HEAD") or request.path != METRICS_PATH or not allowed:
            return _not_found()
        return web.Response(
            body=await metrics_page(database, settings),
            headers={"Content-Type": CONTENT_TYPE, "Cache-Control": "no-store"},
        )

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", answer)
    return application


@asynccontextmanager
async def serving_metrics(
    settings: Settings, database: Database, *, host: str, port: int
) -> AsyncIterator[None]:
    """Serve /metrics on host:port while inside."""
    runner = web.AppRunner(metrics_application(settings, database), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()
