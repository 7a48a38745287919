"""The payer's checkout: the page `urlPayment` opens, its forms (card; PIX simulation in
sandbox), the status its script polls, and its stylesheet and script.

Forms are plain HTML posts (the page works without JavaScript), each checked against forgery
(forms.py); one that pays answers 303 to the page, which then shows the receipt.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.api.rate_limits import CardAttemptsSpent
from tucano.api.wire import json_response, parse_uuid
from tucano.brazil.pix import SANDBOX_ISPB, new_end_to_end_id
from tucano.checkout import card_payments
from tucano.checkout import service as checkouts
from tucano.checkout.card_budgets import pay_within_budgets
from tucano.checkout.card_payments import (
    LOCK_AFTER_REFUSALS,
    CardInProgress,
    CardLocked,
    CardPaid,
    CardRefused,
    LinkNotPayable,
)
from tucano.checkout.deps import Checkouts, CheckoutsDep
from tucano.checkout.forms import (
    CARD_BODY,
    SIMULATION_BODY,
    check_forgery,
    read_card_form,
    read_form,
)
from tucano.checkout.rendering import (
    ASSETS,
    error_answer,
    error_body,
    language_of,
    not_payable,
    page_headers,
    page_urls,
    refused,
    show,
    to_page,
)
from tucano.checkout.service import NOT_A_CHECKOUT, Checkout
from tucano.checkout.texts import TEXTS, hour
from tucano.config import PixProviderName
from tucano.core.clock import clock, format_utc
from tucano.core.errors import AppError, ErrorCode
from tucano.core.money import from_cents
from tucano.deliveries.service import NewEvent
from tucano.events.payloads import Party, PixQrInbound
from tucano.events.types import EventType
from tucano.ingest.service import publish_events_paying_links

router = APIRouter(tags=["checkout"])

LONGEST_TOKEN = 4096
LinkId = Annotated[str, Path(alias="linkPaymentUuid")]
Token = Annotated[str, Query(description="The signed checkout token.")]


def _error(description: str) -> dict[str, Any]:
    """An error answered as a page to a browser, as the error body to anything else."""
    return {
        "description": description,
        "content": {
            "text/html": {"schema": {"type": "string"}},
            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}},
        },
    }


_NOT_FOUND = _error("No such link, or a token that is missing, altered or another link's.")
_EXPIRED = _error("The link has expired.")
_NOT_A_FORM = _error("The form was not sent as application/x-www-form-urlencoded.")
_PAID: dict[int | str, dict[str, Any]] = {
    303: {
        "description": "Paid, or no longer payable: the checkout page, which shows the receipt "
        "or says the link was cancelled.",
        "headers": {"Location": {"schema": {"type": "string"}}},
    }
}


def _link_uuid(text: str) -> uuid.UUID:
    try:
        return parse_uuid(text)
    except ValueError:
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT]) from None


def _check_token(request: Request, token: str) -> None:
    # Ours are a few hundred characters, and an address carries one: of two, which would
    # count? (The framework would take the last.)
    if len(token) > LONGEST_TOKEN or len(request.query_params.getlist("token")) > 1:
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT])


async def _open(request: Request, ctx: Checkouts, link_id: str, token: str) -> Checkout:
    """The checkout `token` opens, read in a read session of its own (closed before anything
    slow, such as a card processor's answer, is waited for)."""
    link_uuid = _link_uuid(link_id)
    _check_token(request, token)
    async with ctx.database.read_session() as session:
        return await _open_in(session, ctx, link_uuid, token)


async def _open_in(
    session: AsyncSession, ctx: Checkouts, link_uuid: uuid.UUID, token: str
) -> Checkout:
    return await checkouts.open_checkout(
        session,
        link_uuid=link_uuid,
        token=token,
        keys=ctx.keys,
        now=clock.now(),
        sandbox=ctx.site.sandbox,
        card_processor_configured=ctx.card_processor is not None,
        pix=ctx.pix,
    )


async def _submitted(request: Request, ctx: Checkouts, checkout: Checkout) -> dict[str, str]:
    """The form posted to `checkout`, once it passed the forgery check."""
    form = await read_form(request)
    check_forgery(request, ctx.site.csrf_key, form, checkout.link.uuid)
    return form


def _back(link_id: str, token: str) -> str | None:
    """The checkout page a failed form came from, for the error page's link back."""
    try:
        return page_urls(parse_uuid(link_id), token)["page"]
    except ValueError:
        return None


_BACK_TO_THE_PAGE: dict[str, Any] = {
    "summary": "A form's address opened with GET: back to the checkout page",
    "description": "303 to the page (a refused payment's page reloaded, a tab restored).",
    "response_class": Response,
    "status_code": 303,
    "responses": {
        303: {
            "description": "The checkout page.",
            "headers": {"Location": {"schema": {"type": "string"}}},
        },
        404: _error("No such link."),
    },
}


@router.get("/checkout/{linkPaymentUuid}/card", **_BACK_TO_THE_PAGE)
@router.get("/checkout/{linkPaymentUuid}/pix/simulate", **_BACK_TO_THE_PAGE)
async def back_to_the_page(link_id: LinkId, token: Token = "") -> Response:
    """A form's address opened (a refused payment's page reloaded, a tab restored): the page."""
    page = _back(link_id, token)
    if page is None:
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT])
    return to_page(page)


@router.get("/checkout/assets/{name}", include_in_schema=False)
async def checkout_asset(name: str) -> Response:
    if name not in ASSETS:
        raise AppError(ErrorCode.ROUTE_NOT_FOUND, errors=["no such checkout asset"])
    body, media_type = ASSETS[name]
    return Response(
        body,
        media_type=media_type,
        headers={
            "Cache-Control": "public, max-age=31536000, immutable",
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.get(
    "/checkout/{linkPaymentUuid}",
    summary="The payer's checkout page (the link's urlPayment)",
    description="An HTML page where the payer pays the link: by PIX (QR code and copy-and-paste "
    "code) or by card in instalments, in Portuguese (English when Accept-Language prefers it); "
    "once paid, its receipt (with what was refunded); a cancelled link's page says so and offers "
    "nothing. 404 for a token that is missing, altered or another link's; 410 "
    "once the link has expired. Errors are an HTML page for a client that prefers text/html, "
    "the error body otherwise.",
    response_class=HTMLResponse,
    responses={404: _NOT_FOUND, 410: _EXPIRED},
)
async def checkout_page(
    link_id: LinkId, request: Request, ctx: CheckoutsDep, token: Token = ""
) -> Response:
    try:
        checkout = await _open(request, ctx, link_id, token)
    except AppError as error:
        return error_answer(request, ctx.site, error)
    return show(request, ctx.site, checkout, token)


@router.get(
    "/checkout/{linkPaymentUuid}/status",
    summary="The link's status, for the checkout page's script",
    description='`{"status": "CREATED"}`, or `PAID`, `REFUNDED`, `CANCELLED`; 404 and 410 as '
    "the page.",
    responses={
        200: {
            "description": "The link's status.",
            "content": {"application/json": {"example": {"status": "CREATED"}}},
        },
        404: _NOT_FOUND,
        410: _EXPIRED,
    },
)
async def checkout_status(
    link_id: LinkId, request: Request, ctx: CheckoutsDep, token: Token = ""
) -> Response:
    try:
        link_uuid = _link_uuid(link_id)
        _check_token(request, token)
        async with ctx.database.read_session() as session:
            found = await checkouts.find_link(
                session, link_uuid=link_uuid, token=token, keys=ctx.keys, now=clock.now()
            )
    except AppError as error:
        return error_body(request, ctx.site, error.code, error.errors)
    return json_response({"status": found.status}, headers=page_headers(ctx.site))


@router.post(
    "/checkout/{linkPaymentUuid}/card",
    summary="Pay the link by card (the checkout page's form)",
    description="The card form of the checkout page. 303 to the page once paid; a refusal is "
    "the page again (402) saying why in its `role=alert` element, and the link stays CREATED. "
    "After 5 refusals card payment of the link is locked for 15 minutes (429); across links, "
    "an address gets TUCANO_CARD_REFUSALS_PER_ADDRESS refusals (10 an hour) and a card "
    "TUCANO_CARD_REFUSALS_PER_CARD (5 an hour), then a 429 without the processor being asked. "
    "Never stores, logs or repeats the card number or security code.",
    response_class=HTMLResponse,
    openapi_extra=CARD_BODY,
    responses={
        **_PAID,
        400: _error("A field of the form is invalid (each named)."),
        402: _error("The card was refused (declined, insufficient funds, processing error)."),
        403: _error("The form failed its anti-forgery check, or card payment is not offered."),
        404: _NOT_FOUND,
        409: _error(
            "Another card payment of this link is in progress, or (errorCode 44, to a client "
            "other than a browser) the link is paid, refunded or cancelled."
        ),
        410: _EXPIRED,
        415: _NOT_A_FORM,
        429: _error(
            "Card payment of this link is locked after 5 refusals, or this address or card had "
            "too many refusals across links; see Retry-After."
        ),
    },
)
async def pay_by_card(
    link_id: LinkId, request: Request, ctx: CheckoutsDep, token: Token = ""
) -> Response:
    processor = ctx.card_processor
    site = ctx.site
    try:
        checkout = await _open(request, ctx, link_id, token)
        if checkout.status != "CREATED":
            return not_payable(request, site, checkout.link.uuid, token, checkout.status)
        if not checkout.cards_accepted or processor is None:
            raise AppError(
                ErrorCode.PAYMENT_METHOD_UNAVAILABLE,
                errors=["card payment is not offered for this link"],
            )
        form = await _submitted(request, ctx, checkout)
    except AppError as error:
        return error_answer(request, site, error, back=_back(link_id, token))
    back = page_urls(checkout.link.uuid, token)["page"]
    language = language_of(request)
    t = TEXTS[language]
    if checkout.card_locked_until is not None:
        until = checkout.card_locked_until
        return refused(
            request,
            site,
            checkout,
            token,
            ErrorCode.CARD_PAYMENT_LOCKED,
            t["card_locked"].format(hour=hour(until)),
            errors=[_locked_line(until)],
            retry_after=until,
        )
    card, kept = read_card_form(form, checkout, language)
    if card is None:
        return refused(
            request,
            site,
            checkout,
            token,
            ErrorCode.INVALID_PARAMETERS,
            t["form_problems"],
            form=kept,
            errors=[f"{name} is invalid" for name in kept.problems],
        )
    outcome = await pay_within_budgets(
        ctx.card_budgets,
        host=request.client.host if request.client else "",
        card=card,
        pay=partial(
            card_payments.pay_by_card,
            ctx.database,
            link_id=checkout.link.id,
            card=card,
            installments=kept.installments,
            processor=processor,
            timeout_seconds=ctx.card_timeout_seconds,
        ),
    )
    match outcome:
        case CardPaid():
            return to_page(back)
        case LinkNotPayable(status="EXPIRED"):
            expired = AppError(
                ErrorCode.PAYMENT_LINK_EXPIRED, errors=["the payment link has expired"]
            )
            return error_answer(request, site, expired)
        case LinkNotPayable(status=status):  # paid, or cancelled, meanwhile
            return not_payable(request, site, checkout.link.uuid, token, status)
        case CardRefused(reason=reason, locked_until=locked_until):
            message = t[reason.value]
            if locked_until is not None:
                message += " " + t["card_locked"].format(hour=hour(locked_until))
            return refused(
                request,
                site,
                replace(checkout, card_locked_until=locked_until),
                token,
                ErrorCode.CARD_REFUSED,
                message,
                form=kept,
                errors=[f"the card was refused: {reason.value}"],
            )
        case CardLocked(until=until):
            return refused(
                request,
                site,
                replace(checkout, card_locked_until=until),
                token,
                ErrorCode.CARD_PAYMENT_LOCKED,
                t["card_locked"].format(hour=hour(until)),
                errors=[_locked_line(until)],
                retry_after=until,
            )
        case CardAttemptsSpent(budget=budget, retry_after=seconds):
            until = clock.now() + timedelta(seconds=seconds)
            whence = "from this address" if budget == "address" else "with this card"
            return refused(
                request,
                site,
                checkout,
                token,
                ErrorCode.RATE_LIMITED,
                t[f"card_attempts_{budget}"].format(hour=hour(until)),
                form=kept,
                errors=[f"too many refused card attempts {whence}; see Retry-After"],
                retry_after=until,
            )
        case CardInProgress():
            return refused(
                request,
                site,
                checkout,
                token,
                ErrorCode.CARD_PAYMENT_IN_PROGRESS,
                t["card_in_progress"],
                form=kept,
                errors=["another card payment of this link is waiting for its answer"],
            )
    raise AssertionError(outcome)  # pragma: no cover


def _locked_line(until: datetime) -> str:
    return (
        f"card payment of this link is locked after {LOCK_AFTER_REFUSALS} refusals, "
        f"until {format_utc(until)}"
    )


@router.post(
    "/checkout/{linkPaymentUuid}/pix/simulate",
    summary="Sandbox: pay the link by PIX as the PIX system would report it",
    description="Publishes the `PIX_QR_INBOUND` a real payment of the link's BR Code would "
    "(its txid and amount, a generated end-to-end id), which pays the link through the same path "
    "as in production. 303 to the page. Sandbox only (403 in production).",
    response_class=HTMLResponse,
    openapi_extra=SIMULATION_BODY,
    responses={
        **_PAID,
        400: _error("The form is invalid."),
        403: _error("The form failed its anti-forgery check, or this is not the sandbox."),
        404: _NOT_FOUND,
        409: _error("The link is paid, refunded or cancelled (to a client other than a browser)."),
        410: _EXPIRED,
        415: _NOT_A_FORM,
    },
)
async def simulate_pix_payment(
    link_id: LinkId, request: Request, ctx: CheckoutsDep, token: Token = ""
) -> Response:
    try:
        checkout = await _open(request, ctx, link_id, token)
        if ctx.pix.name is not PixProviderName.SANDBOX:
            raise AppError(
                ErrorCode.SANDBOX_ONLY,
                errors=["Pix is simulated only in sandbox, with TUCANO_PIX_PROVIDER=sandbox"],
            )
        if checkout.status != "CREATED":
            return not_payable(request, ctx.site, checkout.link.uuid, token, checkout.status)
        await _submitted(request, ctx, checkout)
    except AppError as error:
        return error_answer(request, ctx.site, error, back=_back(link_id, token))
    link = checkout.link
    if checkout.pix_code is not None and link.pix_txid:
        now = clock.now()
        payment = PixQrInbound(
            txid=link.pix_txid,
            amount=from_cents(link.amount_cents),
            payer=Party(document_number=link.registration_number, name=link.payer_name),
            end_to_end_id=new_end_to_end_id(ispb=SANDBOX_ISPB, at=now),
            type="PAYMENT",
            status="CONFIRMED",
            payment_date=now,
            user_reference=link.user_reference,
        )
        event = NewEvent(link.customer_id, EventType.PIX_QR_INBOUND, payment)
        async with ctx.database.session() as writing:
            await publish_events_paying_links(writing, [event])
            await writing.commit()
    return to_page(page_urls(link.uuid, token)["page"])
