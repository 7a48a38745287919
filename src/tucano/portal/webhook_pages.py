"""The portal's webhooks: the list (each webhook's target, event type, state, success rate and
last attempt), creating one, and each webhook's page: edit, switch on or off, reveal and rotate
its signing secret, send a test event (sandbox), delete. The pattern of every section: a GET
page from the features' services, and forms that post an action and answer 303 back to a page.

The signing secret is the exception: revealed or rotated, it is the answer to that POST itself,
so that no address, history entry or later page holds it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from tucano.api.deps import provided
from tucano.api.errors import validation_lines
from tucano.core.clock import clock
from tucano.core.errors import AppError, BadRequest, ErrorCode
from tucano.core.languages import moment
from tucano.deliveries import service as deliveries
from tucano.deliveries.schemas import SampleEventRequest
from tucano.portal import pages, webhook_forms
from tucano.portal.deps import (
    PageSession,
    PageSessionDep,
    Portal,
    PortalDep,
    SignedForm,
    form_reader,
)
from tucano.portal.layout import show
from tucano.portal.rendering import PREFIX
from tucano.portal.routing import PortalPageRoute
from tucano.portal.texts import TEXTS
from tucano.portal.webhook_forms import EVENT_TYPES, FIELDS, WebhookForm
from tucano.webhooks import service as webhooks
from tucano.webhooks.models import Webhook
from tucano.webhooks.schemas import WebhookIdInPath, WebhookSecret, WebhookUpdate
from tucano.webhooks.secret_store import WebhookSecretStore
from tucano.webhooks.url_safety import MAX_URL_LENGTH

router = APIRouter(
    prefix=f"{PREFIX}/webhooks", route_class=PortalPageRoute, include_in_schema=False
)
LIST = f"{PREFIX}/webhooks"
# What a page says after an action (its `done` parameter): only these, by their text's key.
LIST_DONE = {
    "activated": "done_activated",
    "deactivated": "done_deactivated",
    "deleted": "wh_done_deleted",
}
WEBHOOK_DONE = {
    "created": "wh_done_created",
    "updated": "wh_done_updated",
    "test_sent": "wh_done_test_sent",
}
EVENT_ID = re.compile(r"evt_[0-9a-f]{32}")

WebhookId = Annotated[WebhookIdInPath, Path(alias="id")]
SecretStoreDep = Annotated[WebhookSecretStore, Depends(provided("webhook_secret_store"))]
Done = Annotated[str | None, Query(max_length=20)]


def _writable(page: PageSession) -> None:
    """A page that exists only to change something is refused to a read-only session, as its
    form would be."""
    if page.read_only:
        raise AppError(
            ErrorCode.PORTAL_READ_ONLY, errors=["this session was opened with readOnly: true"]
        )


@router.get("")
async def webhooks_list(
    request: Request,
    page: PageSessionDep,
    portal: PortalDep,
    number: Annotated[int, Query(alias="page", ge=0, le=10_000)] = 0,
    done: Done = None,
) -> Response:
    listed = await pages.webhooks_page(
        portal.database,
        customer_id=page.customer_id,
        page=number,
        now=clock.now(),
        language=page.language,
    )
    said = TEXTS[page.language][LIST_DONE[done]] if done in LIST_DONE else None
    return show(request, page, "webhooks.html", current="webhooks", listed=listed, done=said)


def _new_page(request: Request, page: PageSession, portal: Portal, form: WebhookForm) -> Response:
    return show(
        request,
        page,
        "webhook_new.html",
        current="webhooks",
        status=409 if "form" in form.problems else 400 if form.problems else 200,
        form=form,
        event_types=EVENT_TYPES,
        sandbox=portal.settings.is_sandbox,
        longest_url=MAX_URL_LENGTH,
    )


@router.get("/new")
async def new_webhook(request: Request, page: PageSessionDep, portal: PortalDep) -> Response:
    _writable(page)
    return _new_page(request, page, portal, WebhookForm())


@router.post("/new")
async def create_webhook(
    request: Request,
    portal: PortalDep,
    store: SecretStoreDep,
    form: Annotated[SignedForm, form_reader(*FIELDS, longest_value=MAX_URL_LENGTH)],
) -> Response:
    typed = WebhookForm.posted(form.fields)
    created = await webhook_forms.create(
        portal.database,
        typed,
        customer_id=form.page.customer_id,
        settings=portal.settings,
        store=store,
        language=form.page.language,
    )
    if created is None:
        return _new_page(request, form.page, portal, typed)
    return RedirectResponse(f"{LIST}/{created.id}?done=created", 303)


async def _webhook_page(
    request: Request,
    page: PageSession,
    portal: Portal,
    webhook_id: int,
    *,
    status: int = 200,
    done: str | None = None,
    event_id: str | None = None,
    **context: Any,
) -> Response:
    """The webhook's page; `done` is the key of the line saying what was just done."""
    shown = await webhook_forms.detail(
        portal.database,
        customer_id=page.customer_id,
        webhook_id=webhook_id,
        now=clock.now(),
        language=page.language,
    )
    return show(
        request,
        page,
        "webhook.html",
        current="webhooks",
        status=status,
        w=shown,
        form=context.pop("form", shown.form),
        done=None
        if done is None
        else TEXTS[page.language][done].format(event_id=event_id, event_type=shown.event_type),
        event_types=EVENT_TYPES,
        sandbox=portal.settings.is_sandbox,
        longest_url=MAX_URL_LENGTH,
        **context,
    )


@router.get("/{id}")
async def webhook_page(
    request: Request,
    webhook_id: WebhookId,
    page: PageSessionDep,
    portal: PortalDep,
    done: Done = None,
    event: Annotated[str | None, Query(max_length=40)] = None,
) -> Response:
    if done == "test_sent" and (event is None or not EVENT_ID.fullmatch(event)):
        done = None
    return await _webhook_page(
        request, page, portal, webhook_id, done=WEBHOOK_DONE.get(done or ""), event_id=event
    )


@router.post("/{id}/edit")
async def edit_webhook(
    request: Request,
    webhook_id: WebhookId,
    portal: PortalDep,
    form: Annotated[SignedForm, form_reader(*FIELDS, longest_value=MAX_URL_LENGTH)],
) -> Response:
    typed = WebhookForm.posted(form.fields)
    changed = await webhook_forms.update(
        portal.database,
        typed,
        customer_id=form.page.customer_id,
        webhook_id=webhook_id,
        settings=portal.settings,
        language=form.page.language,
    )
    if changed is None:
        return await _webhook_page(request, form.page, portal, webhook_id, status=400, form=typed)
    return RedirectResponse(f"{LIST}/{webhook_id}?done=updated", 303)


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


@router.post("/{id}/secret")
async def reveal_secret(
    request: Request,
    webhook_id: WebhookId,
    portal: PortalDep,
    store: SecretStoreDep,
    form: Annotated[SignedForm, form_reader()],
) -> Response:
    async with portal.database.read_session() as session:
        webhook = await webhooks.get_webhook(
            session, customer_id=form.page.customer_id, webhook_id=webhook_id
        )
    return await _webhook_page(
        request, form.page, portal, webhook_id, secret=_opened(store, webhook, form.page)
    )


@dataclass(frozen=True)
class OpenedSecret:
    secret: str
    previous_until: str | None  # the latest a replaced secret still signs, Brasília time


def _opened(store: WebhookSecretStore, webhook: Webhook, page: PageSession) -> OpenedSecret:
    """The webhook's signing secret as the API's GET /webhook/v1/{id}/secret gives it."""
    said = WebhookSecret.of(
        secret=store.secret(webhook),
        stored_previous=store.previous_secrets(webhook),
        now=clock.now(),
    )
    until = said.previous_secret_expires_at
    return OpenedSecret(said.secret, None if until is None else moment(until, page.language))


async def _confirm_page(
    request: Request, page: PageSession, portal: Portal, webhook_id: int, *, action: str
) -> Response:
    _writable(page)
    async with portal.database.read_session() as session:
        webhook = await webhooks.get_webhook(
            session, customer_id=page.customer_id, webhook_id=webhook_id
        )
    return show(
        request,
        page,
        "webhook_confirm.html",
        current="webhooks",
        action=action,
        webhook_id=webhook.id,
        target_url=webhook.target_url,
    )


@router.get("/{id}/rotate")
async def confirm_rotation(
    request: Request, webhook_id: WebhookId, page: PageSessionDep, portal: PortalDep
) -> Response:
    return await _confirm_page(request, page, portal, webhook_id, action="rotate")


@router.post("/{id}/rotate")
async def rotate_secret(
    request: Request,
    webhook_id: WebhookId,
    portal: PortalDep,
    store: SecretStoreDep,
    form: Annotated[SignedForm, form_reader()],
) -> Response:
    async with portal.database.session() as session:
        webhook = await webhooks.rotate_secret(
            session,
            customer_id=form.page.customer_id,
            webhook_id=webhook_id,
            secret_store=store,
        )
        await session.commit()
    return await _webhook_page(
        request,
        form.page,
        portal,
        webhook_id,
        secret=_opened(store, webhook, form.page),
        rotated=True,
    )


@router.post("/{id}/test-event")
async def send_test_event(
    webhook_id: WebhookId, portal: PortalDep, form: Annotated[SignedForm, form_reader("variant")]
) -> Response:
    async with portal.database.read_session() as session:
        webhook = await webhooks.get_webhook(
            session, customer_id=form.page.customer_id, webhook_id=webhook_id
        )
    try:
        sample = SampleEventRequest(
            event_type=webhook.event_type, variant=form.fields.get("variant") or None
        )
    except ValidationError as invalid:
        raise BadRequest(*validation_lines([dict(e) for e in invalid.errors()])) from None
    event = await deliveries.send_test_event(
        portal.database,
        customer_id=form.page.customer_id,
        partner_id=webhook.partner_id,
        event_type=sample.event_type,
        variant=sample.variant,
        sandbox=portal.settings.is_sandbox,
    )
    return RedirectResponse(f"{LIST}/{webhook_id}?done=test_sent&event={event.id}", 303)


@router.get("/{id}/delete")
async def confirm_deletion(
    request: Request, webhook_id: WebhookId, page: PageSessionDep, portal: PortalDep
) -> Response:
    return await _confirm_page(request, page, portal, webhook_id, action="delete")


@router.post("/{id}/delete")
async def delete_webhook(
    webhook_id: WebhookId, portal: PortalDep, form: Annotated[SignedForm, form_reader()]
) -> Response:
    async with portal.database.session() as session:
        await deliveries.delete_webhook(
            session, customer_id=form.page.customer_id, webhook_id=webhook_id
        )
        await session.commit()
    return RedirectResponse(f"{LIST}?done=deleted", 303)
