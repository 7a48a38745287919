"""The portal's webhooks: the list (each webhook's target, event type, state, success rate and
last attempt) and switching one on or off. The pattern of every section: a GET page from the
features' services, and forms that post an action and answer 303 back to the page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from tucano.core.clock import clock
from tucano.portal import pages
from tucano.portal.deps import PageSessionDep, PortalDep, SignedForm, form_reader
from tucano.portal.layout import show
from tucano.portal.rendering import PREFIX
from tucano.portal.routing import PortalPageRoute
from tucano.webhooks import service as webhooks
from tucano.webhooks.schemas import WebhookIdInPath, WebhookUpdate

router = APIRouter(
    prefix=f"{PREFIX}/webhooks", route_class=PortalPageRoute, include_in_schema=False
)
LIST = f"{PREFIX}/webhooks"
# What the list says after an action (its `done` parameter): only these.
DONE = frozenset({"activated", "deactivated"})


@router.get("")
async def webhooks_list(
    request: Request,
    page: PageSessionDep,
    portal: PortalDep,
    number: Annotated[int, Query(alias="page", ge=0, le=10_000)] = 0,
    done: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    listed = await pages.webhooks_page(
        portal.database,
        customer_id=page.customer_id,
        page=number,
        now=clock.now(),
        language=page.language,
    )
    return show(
        request,
        page,
        "webhooks.html",
        current="webhooks",
        listed=listed,
        done=done if done in DONE else None,
    )


async def _set_active(
    portal: PortalDep, form: SignedForm, webhook_id: int, active: bool
) -> Response:
    async with portal.database.session() as session:
        await webhooks.update_webhook(
            session,
            customer_id=form.page.customer_id,
            webhook_id=webhook_id,
            data=WebhookUpdate(is_active=active),
        )
        await session.commit()
    return RedirectResponse(f"{LIST}?done={'activated' if active else 'deactivated'}", 303)


WebhookId = Annotated[WebhookIdInPath, Path(alias="id")]


@router.post("/{id}/activate")
async def activate_webhook(
    webhook_id: WebhookId, portal: PortalDep, form: Annotated[SignedForm, form_reader()]
) -> Response:
    return await _set_active(portal, form, webhook_id, True)


@router.post("/{id}/deactivate")
async def deactivate_webhook(
    webhook_id: WebhookId, portal: PortalDep, form: Annotated[SignedForm, form_reader()]
) -> Response:
    return await _set_active(portal, form, webhook_id, False)
