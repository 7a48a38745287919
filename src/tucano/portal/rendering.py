"""How the portal answers: its pages (in the session's language, with their headers), its
stylesheet and script, and errors as a page for a browser or the one error body otherwise."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.types import ASGIApp

from tucano.api.dependencies import preferred_media_type
from tucano.api.errors import error_response, transaction_id_of
from tucano.api.page_headers import HeadersUnder
from tucano.config import Settings
from tucano.core.errors import AppError, ErrorCode
from tucano.core.languages import LANGUAGES, Language, money, preferred_language
from tucano.portal.texts import TEXTS

PREFIX = "/portal"
HSTS = "max-age=31536000"

_templates = Environment(
    loader=PackageLoader("tucano.portal", "templates"),
    autoescape=select_autoescape(default=True),
    auto_reload=False,
)
_templates.globals["money"] = money
_STATIC = files("tucano.portal").joinpath("static")
ASSETS: dict[str, tuple[bytes, str]] = {
    "portal.css": (_STATIC.joinpath("portal.css").read_bytes(), "text/css; charset=utf-8"),
    "portal.js": (_STATIC.joinpath("portal.js").read_bytes(), "text/javascript; charset=utf-8"),
    "webhooks.js": (_STATIC.joinpath("webhooks.js").read_bytes(), "text/javascript; charset=utf-8"),
    "payment-links.js": (
        _STATIC.joinpath("payment-links.js").read_bytes(),
        "text/javascript; charset=utf-8",
    ),
}
# In the assets' addresses, so that a browser caching them for a year never keeps a stale one.
ASSET_VERSION = hashlib.sha256(b"".join(body for body, _ in ASSETS.values())).hexdigest()[:12]
ASSET_URLS = {
    "css": f"{PREFIX}/static/portal.css?v={ASSET_VERSION}",
    "js": f"{PREFIX}/static/portal.js?v={ASSET_VERSION}",
    "webhooks_js": f"{PREFIX}/static/webhooks.js?v={ASSET_VERSION}",
    "payment_links_js": f"{PREFIX}/static/payment-links.js?v={ASSET_VERSION}",
}
# Which texts an error's page shows (the others: not found, or an invalid request).
_ERROR_PAGES = {
    ErrorCode.PORTAL_LINK_INVALID,
    ErrorCode.PORTAL_LINK_USED,
    ErrorCode.PORTAL_LINK_EXPIRED,
    ErrorCode.PORTAL_SESSION_ENDED,
    ErrorCode.PORTAL_READ_ONLY,
    ErrorCode.PORTAL_FORM_EXPIRED,
}
_WITHOUT_SESSION = {
    ErrorCode.PORTAL_LINK_INVALID,
    ErrorCode.PORTAL_LINK_USED,
    ErrorCode.PORTAL_LINK_EXPIRED,
    ErrorCode.PORTAL_SESSION_ENDED,
}


@dataclass(frozen=True)
class Site:
    """What the portal's answers depend on beyond the request, set once at start-up."""

    https: bool  # TUCANO_PUBLIC_URL is https: HSTS, and the session cookie is Secure
    frame_ancestors: str  # TUCANO_PORTAL_FRAME_ANCESTORS, as CSP writes it
    csrf_key: bytes

    @classmethod
    def of(cls, settings: Settings, *, csrf_key: bytes) -> Site:
        return cls(
            https=settings.public_url.startswith("https://"),
            frame_ancestors=settings.portal_frame_ancestors,
            csrf_key=csrf_key,
        )

    @property
    def framed_across_sites(self) -> bool:
        """Whether another site's page may frame the portal (an origin other than 'self')."""
        return any(source not in ("'none'", "'self'") for source in self.frame_ancestors.split())

    @property
    def cookie_name(self) -> str:
        # On https, a name browsers accept only from a secure page with the Secure flag.
        return "__Secure-tucano_portal" if self.https else "tucano_portal"

    @property
    def cookie_same_site(self) -> str:
        """Lax, unless the portal is framed by another site: there a Lax cookie is never sent,
        so it is None (Secure and Partitioned, on https only, where browsers take it)."""
        return "none" if self.framed_across_sites and self.https else "lax"

    def session_cookie(self, value: str, *, max_age: int) -> str:
        """The Set-Cookie header of the session cookie (`max_age` 0 deletes it: with the same
        attributes, or a partitioned one would stay). Written here: the standard library writes
        Partitioned only from Python 3.14."""
        attributes = [
            f"{self.cookie_name}={value}",
            f"Max-Age={max(0, max_age)}",
            f"Path={PREFIX}",
            "HttpOnly",
            f"SameSite={self.cookie_same_site.capitalize()}",
        ]
        if self.https:
            attributes.append("Secure")
        if self.cookie_same_site == "none":
            attributes.append("Partitioned")
        return "; ".join(attributes)

    def headers(self) -> dict[str, str]:
        return portal_headers(https=self.https, frame_ancestors=self.frame_ancestors)


def portal_headers(*, https: bool, frame_ancestors: str) -> dict[str, str]:
    """Every answer under /portal: only Tucano's own files load, only the origins named may
    frame it, no Referer carries the start token away and no cache keeps a page."""
    headers = {
        "Content-Security-Policy": (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; base-uri 'none'; "
            f"frame-ancestors {frame_ancestors}"
        ),
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
        "Vary": "Accept, Accept-Language, Cookie",
    }
    if frame_ancestors == "'none'":
        # For browsers that know no frame-ancestors (it cannot name several origins).
        headers["X-Frame-Options"] = "DENY"
    if https:
        headers["Strict-Transport-Security"] = HSTS
    return headers


class PortalHeaders(HeadersUnder):
    """Every answer under /portal carries the page's headers, those the edge or the framework
    make too (a 405, a 413, an unknown path)."""

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        headers = portal_headers(
            https=settings.public_url.startswith("https://"),
            frame_ancestors=settings.portal_frame_ancestors,
        )
        super().__init__(app, prefix=PREFIX, headers=headers)


def wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return preferred_media_type(accept, ["application/json", "text/html"]) == "text/html"


def language_of(request: Request) -> Language:
    """The session's language once known (see deps.py), else the browser's."""
    chosen = getattr(request.state, "portal_language", None)
    for language in LANGUAGES:
        if chosen == language:
            return language
    return preferred_language(request.headers.get("accept-language", ""))


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template `name` in the request's language, with the portal's headers."""
    language = context.setdefault("lang", language_of(request))
    context.setdefault("t", TEXTS[language])
    context["assets"] = ASSET_URLS
    html = _templates.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status)


def error_answer(request: Request, error: AppError) -> Response:
    """A failure as a browser is shown it (a page of the same status saying what to do), or
    as the error body for any other client."""
    if not wants_html(request):
        return error_response(
            error.code,
            transaction_id_of(request.scope.get("state", {})),
            message=error.message,
            errors=error.errors,
            headers=error.headers,
        )
    if error.code in _ERROR_PAGES:
        kind = error.code.name
    else:
        kind = "not_found" if error.status_code == 404 else "invalid"
    # No way home without a session: only a new session URL opens the portal again.
    home = error.code not in _WITHOUT_SESSION
    response = render(request, "message.html", error.status_code, kind=kind, home=home)
    response.headers.update(error.headers)
    return response
