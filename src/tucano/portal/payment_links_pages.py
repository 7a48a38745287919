"""The portal's payment links: the list (the API's filters, newest first), one link (its fields,
payment, refunds, checkout URL and a QR code of it), and creating, cancelling and refunding links
through the same services and idempotency keys as the API. A form carries its own key, so the
same form sent twice creates or refunds once."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from tucano.api.deps import provided
from tucano.api.wire import CanonicalUUID
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, BadRequest, Conflict, ErrorCode
from tucano.core.money import to_cents
from tucano.payment_links import lifecycle
from tucano.payment_links import service as payment_links
from tucano.payment_links.deps import PaymentLinksDep
from tucano.payment_links.lifecycle import RefundRequest
from tucano.portal import payment_link_views as views
from tucano.portal.deps import PageSession, PageSessionDep, SignedForm, form_reader
from tucano.portal.layout import show
from tucano.portal.link_filters import read_filters
from tucano.portal.payment_link_forms import (
    CREATE_FIELDS,
    KEY_FIELD,
    REFUND_FIELDS,
    FormState,
    amount_field,
    form_key,
    read_create,
    read_refund,
)
from tucano.portal.rendering import PREFIX
from tucano.portal.routing import PortalPageRoute
from tucano.portal.texts import TEXTS
from tucano.refunds import service as refunds
from tucano.refunds.refunder import Refunder

router = APIRouter(
    prefix=f"{PREFIX}/payment-links", route_class=PortalPageRoute, include_in_schema=False
)
LIST = f"{PREFIX}/payment-links"
SECTION = "payment_links"
# What a link's page says after an action (its `done` parameter): only these.
DONE = frozenset({"created", "cancelled", "refund"})

RefunderDep = Annotated[Refunder, Depends(provided("refunder"))]
LinkUuid = Annotated[CanonicalUUID, Path(alias="uuid")]


@router.get("")
async def links_list(
    request: Request,
    page: PageSessionDep,
    links: PaymentLinksDep,
    number: Annotated[int, Query(alias="page", ge=0, le=10_000)] = 0,
) -> Response:
    form = read_filters(request.query_params, now=clock.now(), language=page.language)
    listed = None
    if form.filters is not None:
        listed = await views.links_page(
            links,
            customer_id=page.customer_id,
            filters=form.filters,
            page=number,
            language=page.language,
        )
    return show(
        request,
        page,
        "payment_links.html",
        current=SECTION,
        status=200 if listed is not None else 400,
        form=form,
        filter_action=LIST,
        listed=listed,
    )


@router.get("/new")
async def new_link_form(request: Request, page: PageSessionDep) -> Response:
    if page.read_only:
        raise AppError(
            ErrorCode.PORTAL_READ_ONLY, errors=["this session was opened with readOnly: true"]
        )
    return _creation_page(request, page, FormState())


def _creation_page(
    request: Request, page: PageSession, state: FormState, status: int = 200
) -> Response:
    return show(request, page, "payment_link_new.html", current=SECTION, status=status, state=state)


@router.post("")
async def create_link(
    request: Request,
    links: PaymentLinksDep,
    form: Annotated[SignedForm, form_reader(*CREATE_FIELDS, KEY_FIELD)],
) -> Response:
    page = form.page
    data, state = read_create(form.fields, page.language)
    key = form_key(state)
    if data is None:
        return _creation_page(request, page, state, 400)
    link = payment_links.new_link(
        customer_id=page.customer_id, data=data, autopay_delay=links.autopay_delay
    )
    try:
        answer = await payment_links.create_link(
            links.database,
            ref=payment_links.IdempotencyRef(
                page.customer_id, key, payment_links.request_fingerprint(data)
            ),
            link=link,
            response=json_codec.dumps(links.presenter()(link, None)),
        )
    except Conflict:
        # The key made another link already (the form sent, changed, sent again): a new key.
        retry = FormState(values=state.values, problem=TEXTS[page.language]["form_used"])
        return _creation_page(request, page, retry, 409)
    made = json_codec.loads(answer)["linkPaymentUuid"]
    return RedirectResponse(f"{LIST}/{made}?done=created", 303)


@router.get("/{uuid}")
async def link_page(
    request: Request,
    page: PageSessionDep,
    links: PaymentLinksDep,
    link_uuid: LinkUuid,
    done: Annotated[str | None, Query(max_length=20)] = None,
    refund: Annotated[str | None, Query(max_length=40)] = None,
) -> Response:
    return await _link_page(
        request, page, links, link_uuid, done=done if done in DONE else None, refund_id=refund
    )


async def _link_page(
    request: Request,
    page: PageSession,
    links: PaymentLinksDep,
    link_uuid: uuid.UUID,
    *,
    status: int = 200,
    done: str | None = None,
    refund_id: str | None = None,
    refund_form: FormState | None = None,
    refused: tuple[str, str] | None = None,
) -> Response:
    """A link's page; after an action, what came of it (`done`), or why it was `refused` (a
    text's key and the service's reason)."""
    language = page.language
    details = await views.link_details(
        links, customer_id=page.customer_id, link_uuid=link_uuid, language=language
    )
    problem = None
    if refused is not None:
        text, reason = refused
        problem = TEXTS[language][text].format(status=details.status.lower(), reason=reason)
    said: str | None = None
    if done == "refund":
        said = views.refund_outcome(details, refund_id, language)
    elif done is not None:
        said = TEXTS[language][f"done_{done}"]
    if refund_form is None:
        refund_form = FormState()
        if details.left_to_refund is not None:
            refund_form.values["amount"] = amount_field(details.left_to_refund, language)
    return show(
        request,
        page,
        "payment_link.html",
        current=SECTION,
        status=status,
        link=details,
        done=said,
        problem=problem,
        refund_form=refund_form,
    )


@router.post("/{uuid}/cancel")
async def cancel_link(
    request: Request,
    links: PaymentLinksDep,
    link_uuid: LinkUuid,
    form: Annotated[SignedForm, form_reader()],
) -> Response:
    try:
        async with links.database.session() as session:
            await lifecycle.cancel_link(
                session, customer_id=form.page.customer_id, link_uuid=link_uuid
            )
            await session.commit()
    except Conflict:
        return await _link_page(
            request, form.page, links, link_uuid, status=409, refused=("pl_not_cancellable", "")
        )
    return RedirectResponse(f"{LIST}/{link_uuid}?done=cancelled", 303)


@router.post("/{uuid}/refunds")
async def refund_link(
    request: Request,
    links: PaymentLinksDep,
    refunder: RefunderDep,
    link_uuid: LinkUuid,
    form: Annotated[SignedForm, form_reader(*REFUND_FIELDS, KEY_FIELD)],
) -> Response:
    page = form.page
    t = TEXTS[page.language]
    wanted, state = read_refund(form.fields, page.language)
    key = form_key(state)
    if wanted is None:
        return await _link_page(request, page, links, link_uuid, status=400, refund_form=state)
    try:
        answer = await refunds.request_refund(
            links.database,
            refunder,
            RefundRequest(
                customer_id=page.customer_id,
                link_uuid=link_uuid,
                key=key,
                amount_cents=None if wanted.amount is None else to_cents(wanted.amount),
                reason=wanted.reason,
            ),
        )
    except BadRequest:
        # More than is left: the page says how much is.
        state.errors["amount"] = t["refund_too_much"]
        state.problem = t["refund_problem"]
        return await _link_page(request, page, links, link_uuid, status=400, refund_form=state)
    except Conflict as refused:
        if refused.code == ErrorCode.REFUND_IDEMPOTENCY_CONFLICT:
            retry = FormState(values=state.values, problem=t["refund_used"])
            return await _link_page(request, page, links, link_uuid, status=409, refund_form=retry)
        reason = refused.errors[0] if refused.errors else refused.message
        return await _link_page(
            request, page, links, link_uuid, status=409, refused=("pl_not_refundable", reason)
        )
    refund_id = json_codec.loads(answer)["refundId"]
    return RedirectResponse(f"{LIST}/{link_uuid}?done=refund&refund={refund_id}", 303)
