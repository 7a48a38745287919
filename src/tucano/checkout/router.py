"""The payer's checkout page: `urlPayment` opens it. HTML for a browser; an error is a page of
the same status for a browser and the one error body of decisions.md for anything else."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from tucano.checkout import service
from tucano.checkout.service import NOT_A_CHECKOUT
from tucano.clock import clock
from tucano.db import ReadSessionDep
from tucano.errors import AppError, ErrorCode, error_response, transaction_id_of
from tucano.http import preferred_media_type
from tucano.money import from_cents
from tucano.payment_links.installments import installment_options
from tucano.payment_links.schemas import METHOD_PIX
from tucano.wire import parse_uuid

router = APIRouter(tags=["checkout"])

_templates = Environment(
    loader=PackageLoader("tucano.checkout", "templates"),
    autoescape=select_autoescape(default=True),
    auto_reload=False,
)
# The token is in the page's address: no Referer may carry it away, no cache keep the page, and
# no other site frame it. Nothing but the page's own inline style loads.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Vary": "Accept",  # a page for a browser, the error body for anything else
}
LONGEST_TOKEN = 4096


def _error(description: str) -> dict[str, Any]:
    """An error answered as a page to a browser, as the error body to anything else."""
    return {
        "description": description,
        "content": {
            "text/html": {"schema": {"type": "string"}},
            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}},
        },
    }


# Brasília time (no daylight saving since 2019): a fixed offset needs no time-zone database.
_BRASILIA = timezone(timedelta(hours=-3))


def brl(amount: Decimal) -> str:
    """1234.5 as R$ 1.234,50."""
    whole, cents = f"{amount:,.2f}".split(".")
    return f"R$ {whole.replace(',', '.')},{cents}"


def brasilia(moment: datetime) -> str:
    return moment.astimezone(_BRASILIA).strftime("%d/%m/%Y %H:%M")


def _page(name: str, status: int, **context: Any) -> HTMLResponse:
    html = _templates.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


@router.get(
    "/checkout/{linkPaymentUuid}",
    summary="The payer's checkout page (the link's urlPayment)",
    description="An HTML page showing the link to its payer: amount, instalments offered, "
    "verification token, and its payment once paid. 404 for a token that is missing, altered or "
    "another link's; 410 once the link has expired. Errors are an HTML page for a client that "
    "prefers text/html, the error body otherwise.",
    response_class=HTMLResponse,
    responses={
        404: _error("No such link, or a token that is missing, altered or another link's."),
        410: _error("The link has expired."),
    },
)
async def checkout_page(
    link_id: Annotated[str, Path(alias="linkPaymentUuid")],
    request: Request,
    session: ReadSessionDep,
    token: Annotated[str, Query(description="The signed checkout token.")] = "",
) -> Response:
    now = clock.now()
    try:
        try:
            link_uuid = parse_uuid(link_id)
        except ValueError:
            raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT]) from None
        # Ours are a few hundred characters, and an address carries one: of two, which would
        # count? (The framework would take the last.)
        if len(token) > LONGEST_TOKEN or len(request.query_params.getlist("token")) > 1:
            raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT])
        checkout = await service.open_checkout(
            session,
            link_uuid=link_uuid,
            token=token,
            keys=request.app.state.checkout_keys,
            now=now,
        )
    except AppError as error:
        wanted = preferred_media_type(
            request.headers.get("accept", ""), ["application/json", "text/html"]
        )
        if wanted == "text/html":
            return _page("unavailable.html", error.status_code, expired=error.status_code == 410)
        return error_response(
            error.code,
            transaction_id_of(request.scope.get("state", {})),
            errors=error.errors,
            headers=PAGE_HEADERS,
        )
    link, payment = checkout.link, checkout.payment
    return _page(
        "checkout.html",
        200,
        link=link,
        paid=checkout.status == "PAID",
        amount=brl(from_cents(link.amount_cents)),
        expires=brasilia(link.expires_at),
        # Only the options a card charge can be split into: no instalment under a cent (a
        # link of R$ 0,03 in up to 10 offers 1x to 3x; installmentsOptions lists them all).
        options=[
            (n, brl(each))
            for n, each in installment_options(
                link.amount_cents, min(link.numbers_installments, link.amount_cents)
            )
        ],
        payment=None
        if payment is None
        else {
            "method": "PIX" if payment.method == METHOD_PIX else "cartão de crédito",
            "installments": payment.installments,
            "amount": brl(from_cents(payment.amount_cents)),
            "date": brasilia(payment.paid_at),
        },
    )
