"""How the checkout answers: its pages (in the payer's language, with their headers and the
forgery cookie), its stylesheet and script, and errors as a page for a browser or the one error
body of decisions.md for anything else."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from importlib.resources import files
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.types import ASGIApp

from tucano.api.dependencies import preferred_media_type
from tucano.api.errors import error_response, transaction_id_of
from tucano.api.page_headers import HeadersUnder
from tucano.checkout import csrf
from tucano.checkout.page import CardForm, page_context
from tucano.checkout.service import Checkout
from tucano.checkout.texts import TEXTS, Language, preferred_language
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode

_templates = Environment(
    loader=PackageLoader("tucano.checkout", "templates"),
    autoescape=select_autoescape(default=True),
    auto_reload=False,
)
_AMOUNT = re.compile(r"(R\$ [0-9][0-9.,]*[0-9])")
_WHOLE = Markup('<span class="money">{}</span>')


def whole_amounts(text: str) -> Markup:
    """`text`, escaped, with each amount in a span the stylesheet keeps on one line: a narrow
    screen never leaves `R$` at the end of a line and its figure on the next."""
    parts = _AMOUNT.split(text)  # text, amount, text, ... (the amounts at odd places)
    return Markup("").join(
        _WHOLE.format(part) if index % 2 else escape(part) for index, part in enumerate(parts)
    )


_templates.filters["whole_amounts"] = whole_amounts
_STATIC = files("tucano.checkout").joinpath("static")
ASSETS: dict[str, tuple[bytes, str]] = {
    "checkout.css": (_STATIC.joinpath("checkout.css").read_bytes(), "text/css; charset=utf-8"),
    "checkout.js": (
        _STATIC.joinpath("checkout.js").read_bytes(),
        "text/javascript; charset=utf-8",
    ),
}
# In the assets' addresses, so that a browser caching them for a year never keeps a stale one.
ASSET_VERSION = hashlib.sha256(b"".join(body for body, _ in ASSETS.values())).hexdigest()[:12]
_ASSET_URLS = {
    "css": f"/checkout/assets/checkout.css?v={ASSET_VERSION}",
    "js": f"/checkout/assets/checkout.js?v={ASSET_VERSION}",
}

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# The token is in the page's address: no Referer may carry it away, no cache keep the page, and
# no other site frame it. Only Tucano's own stylesheet and script load.
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    # A page for a browser, the error body for anything else; in the payer's language.
    "Vary": "Accept, Accept-Language",
}
HSTS = "max-age=31536000"
# Which error page a failure is, for a browser.
_ERROR_PAGES = {
    ErrorCode.PAYMENT_LINK_EXPIRED: "expired",
    ErrorCode.CHECKOUT_FORM_EXPIRED: "forbidden",
    ErrorCode.PAYMENT_METHOD_UNAVAILABLE: "unavailable",
    ErrorCode.SANDBOX_ONLY: "unavailable",
}


@dataclass(frozen=True)
class Site:
    """What the checkout's answers depend on beyond the request, set once at start-up."""

    sandbox: bool
    https: bool  # TUCANO_PUBLIC_URL is https: HSTS, and the forgery cookie is Secure
    csrf_key: bytes


class CheckoutHeaders(HeadersUnder):
    """Every answer under /checkout carries the page's headers, those the edge or the framework
    make too: none of them may be framed, sniffed or sent on with a Referer holding the token."""

    def __init__(self, app: ASGIApp, *, https: bool) -> None:
        headers = dict(PAGE_HEADERS)
        if https:
            headers["Strict-Transport-Security"] = HSTS
        super().__init__(app, prefix="/checkout", headers=headers)


def brl(amount: Any) -> str:
    """1234.5 as R$ 1.234,50."""
    whole, cents = f"{amount:,.2f}".split(".")
    return f"R$ {whole.replace(',', '.')},{cents}"


def page_headers(site: Site) -> dict[str, str]:
    headers = dict(PAGE_HEADERS)
    if site.https:
        headers["Strict-Transport-Security"] = HSTS
    return headers


def language_of(request: Request) -> Language:
    return preferred_language(request.headers.get("accept-language", ""))


def wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return preferred_media_type(accept, ["application/json", "text/html"]) == "text/html"


def page_urls(link_uuid: uuid.UUID, token: str) -> dict[str, str]:
    """The page's own address and those of its status and forms (relative: whatever host the
    payer reached)."""
    query = "?token=" + quote(token, safe="")
    base = f"/checkout/{link_uuid}"
    return {
        "page": base + query,
        "status": f"{base}/status{query}",
        "card": f"{base}/card{query}",
        "simulate": f"{base}/pix/simulate{query}",
    }


def _render(
    request: Request,
    site: Site,
    name: str,
    status: int,
    *,
    nonce: str | None = None,
    **context: Any,
) -> HTMLResponse:
    language = context.setdefault("lang", language_of(request))
    context.setdefault("t", TEXTS[language])
    context["assets"] = _ASSET_URLS
    html = _templates.get_template(name).render(**context)
    response = HTMLResponse(html, status_code=status, headers=page_headers(site))
    if nonce is not None:
        response.set_cookie(
            csrf.COOKIE,
            nonce,
            path="/checkout",
            httponly=True,
            samesite="lax",
            secure=site.https,
        )
    return response


def error_answer(
    request: Request, site: Site, error: AppError, *, back: str | None = None
) -> Response:
    """A failure as the payer's browser is shown it, or as the error body."""
    if wants_html(request):
        kind = _ERROR_PAGES.get(
            error.code, "not_found" if error.status_code == 404 else "invalid_form"
        )
        # A page that failed its forgery check gets a nonce if the browser has none; one it
        # has is kept, so that a stale tab (or another site) cannot void the payer's forms.
        nonce, new = _nonce_of(request)
        response = _render(
            request,
            site,
            "unavailable.html",
            error.status_code,
            kind=kind,
            back=back,
            nonce=nonce if kind == "forbidden" and new else None,
        )
        response.headers.update(error.headers)
        return response
    return error_body(request, site, error.code, error.errors, headers=error.headers)


def error_body(
    request: Request,
    site: Site,
    code: ErrorCode,
    errors: list[str],
    *,
    headers: dict[str, str] | None = None,
) -> Response:
    return error_response(
        code,
        transaction_id_of(request.scope.get("state", {})),
        errors=errors,
        headers={**page_headers(site), **(headers or {})},
    )


def _nonce_of(request: Request) -> tuple[str, bool]:
    """The browser's forgery nonce, and whether it is new (to be set as a cookie)."""
    held = request.cookies.get(csrf.COOKIE)
    if csrf.is_nonce(held):
        assert held is not None
        return held, False
    return csrf.new_nonce(), True


def show(
    request: Request,
    site: Site,
    checkout: Checkout,
    token: str,
    status: int = 200,
    *,
    form: CardForm | None = None,
    alert: str | None = None,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """The checkout page of `checkout` (a refused form's, with its alert and kept fields)."""
    nonce, new = _nonce_of(request)
    context = page_context(
        checkout,
        language=language_of(request),
        sandbox=site.sandbox,
        urls=page_urls(checkout.link.uuid, token),
        csrf_token=csrf.form_token(site.csrf_key, nonce=nonce, link_uuid=checkout.link.uuid),
        form=form,
        alert=alert,
    )
    response = _render(
        request, site, "checkout.html", status, nonce=nonce if new else None, **context
    )
    response.headers.update(headers or {})
    return response


def refused(
    request: Request,
    site: Site,
    checkout: Checkout,
    token: str,
    code: ErrorCode,
    alert: str,
    *,
    form: CardForm | None = None,
    errors: list[str] | None = None,
    retry_after: datetime | None = None,
) -> Response:
    """A card form that did not pay: the page again saying why, or the error body."""
    headers = {}
    if retry_after is not None:
        seconds = max(1, int((retry_after - clock.now()).total_seconds()) + 1)
        headers["Retry-After"] = str(seconds)
    if not wants_html(request):
        return error_body(request, site, code, errors or [alert], headers=headers)
    return show(
        request, site, checkout, token, code.status, form=form, alert=alert, headers=headers
    )


def not_payable(
    request: Request, site: Site, link_uuid: uuid.UUID, token: str, status: str
) -> Response:
    """A form posted to a link no longer payable (paid, refunded, cancelled), which charges
    nothing: a browser is sent to its page, which says why; any other client gets a 409."""
    if wants_html(request):
        return to_page(page_urls(link_uuid, token)["page"])
    return error_body(
        request,
        site,
        ErrorCode.PAYMENT_LINK_NOT_PAYABLE,
        [f"the payment link is {status}, not CREATED"],
    )


def to_page(page_url: str) -> Response:
    """Post/Redirect/Get: a reload of the page that follows never submits a form again."""
    return RedirectResponse(page_url, status_code=303, headers=PAGE_HEADERS)
