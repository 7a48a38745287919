"""The interactive API docs (/docs, Swagger UI; /redoc, ReDoc) with their scripts and styles
served by Tucano itself from the fastapi-offline package, so they work with no network, and the
index at `/`. TUCANO_DOCS_ENABLED (on in sandbox, off in production) turns the docs and
/openapi.json on or off."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.responses import HTMLResponse, Response

from tucano.api.deps import SettingsDep
from tucano.api.wire import ApiModel
from tucano.core.errors import AppError, ErrorCode

OPENAPI_URL = "/openapi.json"
_ASSET_DIRECTORY = files("fastapi_offline").joinpath("static")
_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}


# ReDoc's sidebar shows its maker's logo from a CDN: the docs' own icon instead, so that the page
# asks nothing of the network.
_REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
_ASSET_BODIES = {
    name: _ASSET_DIRECTORY.joinpath(name)
    .read_bytes()
    .replace(_REDOC_CDN_LOGO, b"/docs/assets/favicon.png")
    for name in _ASSETS
}


class ServiceIndex(ApiModel):
    """Where to go from the service's root."""

    service: str
    version: str
    environment: str
    links: dict[str, str]


def add_docs(app: FastAPI, *, enabled: bool) -> None:
    """The docs, their assets and `/` (which lists the docs only when they are on)."""
    links = {"health": "/health", "liveness": "/health/live", "readiness": "/health/ready"}
    if enabled:
        links = {"docs": "/docs", "redoc": "/redoc", "openapi": OPENAPI_URL, **links}
        _add_interactive_docs(app)

    @app.get(
        "/",
        tags=["operations"],
        summary="What this service is, and where its docs and health checks are",
        response_model=ServiceIndex,
    )
    async def service_index(settings: SettingsDep) -> ServiceIndex:
        return ServiceIndex(
            service="Tucano",
            version=app.version,
            environment=settings.environment.value,
            links=links,
        )


def _add_interactive_docs(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI_URL,
            title=f"{app.title}: API docs",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=OPENAPI_URL,
            title=f"{app.title}: API reference",
            redoc_js_url="/docs/assets/redoc.standalone.js",
            redoc_favicon_url="/docs/assets/favicon.png",
            with_google_fonts=False,
        )

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> Response:
        if name not in _ASSETS:
            raise AppError(ErrorCode.ROUTE_NOT_FOUND, errors=["no such docs asset"])
        return Response(
            _ASSET_BODIES[name],
            media_type=_ASSETS[name],
            headers={"Cache-Control": "public, max-age=86400"},
        )
