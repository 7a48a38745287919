"""The merchant portal: the session call of the API (POST /portal/v1/sessions), the session URL
a browser opens (/portal/start), and the pages, each in the session's language.

Pages are plain HTML (they work without JavaScript); a form posts, is checked (deps.py), and
answers 303 to a page (Post/Redirect/Get). The pages are left out of the OpenAPI document: they
are a browser's, behind a cookie, not operations a client generates methods for."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from tucano.api.dependencies import JsonContent, error_responses, optional_transaction_id
from tucano.api.routing import DecimalJSONRoute
from tucano.api.wire import json_response
from tucano.auth.deps import PortalSessionOpener
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.portal import pages, service
from tucano.portal.deliveries_pages import router as deliveries_pages
from tucano.portal.deps import PageSessionDep, PortalDep, SignedForm, form_reader
from tucano.portal.event_type_pages import router as event_type_pages
from tucano.portal.layout import show
from tucano.portal.payment_links_pages import router as payment_links_pages
from tucano.portal.rendering import ASSETS, PREFIX, render
from tucano.portal.reports_pages import router as reports_pages
from tucano.portal.routing import PortalPageRoute
from tucano.portal.schemas import PortalSessionCreate, PortalSessionCreated
from tucano.portal.webhook_pages import router as webhook_pages

api = APIRouter(
    prefix="/portal/v1",
    tags=["portal"],
    route_class=DecimalJSONRoute,
    dependencies=[Depends(optional_transaction_id)],
)
site = APIRouter(prefix=PREFIX, route_class=PortalPageRoute, include_in_schema=False)
HOME = PREFIX


# The sections whose pages are still to come: (key, path).
@api.post(
    "/sessions",
    status_code=201,
    summary="Open a merchant portal session",
    description="A URL that opens the merchant portal for the caller's own customer, in a "
    "browser or in an iframe of an origin in TUCANO_PORTAL_FRAME_ANCESTORS. Good once, until "
    "`expiresAt`; the session it opens ends then too. With `readOnly`, the portal shows no "
    "actions and refuses them (403). Every field of the body is optional, and so is the body.",
    response_model=PortalSessionCreated,
    responses=error_responses(400, 401, 403, 413, 415),
)
async def create_portal_session(
    caller: PortalSessionOpener,
    _json: JsonContent,
    portal: PortalDep,
    body: Annotated[PortalSessionCreate | None, Body()] = None,
) -> Response:
    wanted = body or PortalSessionCreate()
    async with portal.database.session() as session:
        made = await service.open_session_url(
            session,
            customer_id=caller.customer_id,
            public_url=portal.settings.public_url,
            now=clock.now(),
            lifetime=timedelta(seconds=wanted.expires_in_seconds),
            read_only=wanted.read_only,
            locale=wanted.locale,
            client_id=caller.client_id,
        )
        await session.commit()
    return json_response(PortalSessionCreated.at(made.url, made.expires_at), status_code=201)


@site.get("/static/{name}")
async def portal_asset(name: str) -> Response:
    if name not in ASSETS:
        raise AppError(ErrorCode.ROUTE_NOT_FOUND, errors=["no such portal file"])
    body, media_type = ASSETS[name]
    return Response(
        body,
        media_type=media_type,
        headers={"Cache-Control": "public, max-age=31536000, immutable"},
    )


@site.get("/start")
async def start_session(
    request: Request, portal: PortalDep, token: Annotated[str | None, Query()] = None
) -> Response:
    """Exchange a session URL's token for the session cookie, then the portal, the token gone
    from the address."""
    if len(request.query_params.getlist("token")) > 1:
        token = None  # of two, which would count?
    now = clock.now()
    async with portal.database.session() as session:
        cookie, opened = await service.start_session(session, token=token, now=now)
        await session.commit()
    response = RedirectResponse(HOME, status_code=303)
    lasts = int((opened.expires_at - now).total_seconds())
    response.headers.append("set-cookie", portal.site.session_cookie(cookie, max_age=lasts))
    return response


# /portal/ too: the edge reads a path's trailing slash as a slip.
@site.get("")
async def home(request: Request, page: PageSessionDep, portal: PortalDep) -> Response:
    summary = await pages.overview(portal.database, customer_id=page.customer_id, now=clock.now())
    return show(request, page, "home.html", current=None, overview=summary)


@site.post("/sign-out")
async def sign_out(
    portal: PortalDep, form: Annotated[SignedForm, form_reader(writes=False)]
) -> Response:
    """End the session (a read-only one too): its cookie opens nothing from now on."""
    async with portal.database.session() as session:
        await service.end_session(session, session_id=form.page.session.id, now=clock.now())
        await session.commit()
    response = RedirectResponse(f"{PREFIX}/signed-out", status_code=303)
    response.headers.append("set-cookie", portal.site.session_cookie("", max_age=0))
    return response


@site.get("/signed-out")
async def signed_out(request: Request) -> Response:
    return render(request, "message.html", kind="signed_out", home=False)


router = APIRouter()
router.include_router(api)
router.include_router(site)
router.include_router(webhook_pages)
router.include_router(payment_links_pages)
router.include_router(reports_pages)
router.include_router(deliveries_pages)
router.include_router(event_type_pages)
