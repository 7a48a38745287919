"""The portal's event catalogue: the seven event types Tucano delivers, each with its
description, its payload's JSON schema and its samples, as the OpenAPI document has them."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tucano.portal.deps import PageSessionDep
from tucano.portal.event_catalogue import catalogue
from tucano.portal.layout import show
from tucano.portal.rendering import PREFIX
from tucano.portal.routing import PortalPageRoute

router = APIRouter(
    prefix=f"{PREFIX}/event-types", route_class=PortalPageRoute, include_in_schema=False
)


@router.get("")
async def event_types(request: Request, page: PageSessionDep) -> Response:
    # The application's document, built once and kept (openapi.py), whether or not it is served.
    document = request.app.openapi()
    return show(
        request, page, "event_types.html", current="event_types", entries=catalogue(document)
    )
