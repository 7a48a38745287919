"""The applications `bench/servers.py` serves on granian (and, for the bare route, on uvicorn):
factories, so that each server builds its app in the process that serves it."""

from __future__ import annotations

from fastapi import FastAPI

from tucano.app import create_app
from tucano.config import load_settings
from tucano.core.logs import configure_logging
from tucano.runtime import raise_open_files_limit, tune_garbage_collector


def tucano_app() -> FastAPI:
    """Tucano's app set up as `tucano serve --no-worker` sets it up, less the server and the
    migration (the benchmark migrates the database once, before any server starts)."""
    settings = load_settings()
    configure_logging(settings.log_level, log_format=settings.log_format)
    app = create_app(settings, background=False)
    tune_garbage_collector()
    # The slow-header scenario holds thousands of sockets open on the server, as on uvicorn.
    raise_open_files_limit()
    return app


def bare_app() -> FastAPI:
    """One route and nothing else: what the server itself costs per request."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"status": "ok"}

    raise_open_files_limit()
    return app
