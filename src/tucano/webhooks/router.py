"""The webhook registration interface A1-A5 (spec 4.2) and the signing-secret operations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response

from tucano.api.dependencies import JsonContent, error_responses, optional_transaction_id
from tucano.api.deps import DatabaseDep, ReadSessionDep, SessionDep, SettingsDep, provided
from tucano.api.pagination import Page, PageParams
from tucano.api.routing import DecimalJSONRoute
from tucano.api.wire import json_response
from tucano.auth.deps import WebhookReader, WebhookWriter
from tucano.core.clock import clock
from tucano.events.types import EventType
from tucano.webhooks import service
from tucano.webhooks.models import Webhook as WebhookRow
from tucano.webhooks.schemas import (
    Webhook,
    WebhookCreate,
    WebhookCreated,
    WebhookDeliveryStatus,
    WebhookIdInPath,
    WebhookSecret,
    WebhookUpdate,
)
from tucano.webhooks.secret_store import WebhookSecretStore

router = APIRouter(
    prefix="/webhook/v1",
    tags=["webhooks"],
    route_class=DecimalJSONRoute,
    dependencies=[Depends(optional_transaction_id)],
)

WebhookId = Annotated[WebhookIdInPath, Path(alias="id", description="The webhookId.")]
SecretStoreDep = Annotated[WebhookSecretStore, Depends(provided("webhook_secret_store"))]

# DELETE /webhook/v1/{id} is in deliveries/router.py: deleting a webhook also takes its pending
# deliveries off the queue (deliveries.service.delete_webhook).


@router.get(
    "/list",
    summary="List webhooks (A1)",
    response_model=Page[Webhook],
    responses=error_responses(400, 401, 403),
)
async def list_webhooks(
    caller: WebhookReader,
    database: DatabaseDep,
    page: PageParams,
    event_type: Annotated[
        EventType | None, Query(alias="eventType", description="Only this event type.")
    ] = None,
) -> Response:
    rows, total = await service.list_webhooks(
        database, customer_id=caller.customer_id, event_type=event_type, page=page
    )
    return json_response(
        Page[Webhook].of([Webhook.of(r) for r in rows], total=total, page=page.page, size=page.size)
    )


@router.post(
    "/create",
    summary="Create a webhook (A2)",
    description="A customer may have at most TUCANO_MAX_WEBHOOKS_PER_CUSTOMER webhooks "
    "(default 100): one more is a 409.",
    response_model=WebhookCreated,
    responses=error_responses(400, 401, 403, 409, 413, 415),
)
async def create_webhook(
    caller: WebhookWriter,
    _json: JsonContent,
    body: WebhookCreate,
    settings: SettingsDep,
    database: DatabaseDep,
    store: SecretStoreDep,
) -> WebhookCreated:
    # Before the session: the check may wait on DNS, and on SQLite a write session holds the
    # database's one writer.
    await service.check_target(body.target_url, settings)
    async with database.session() as session:
        webhook = await service.create_webhook(
            session, caller=caller, data=body, settings=settings, secret_store=store
        )
        await session.commit()
    return WebhookCreated.with_secret(webhook, secret=store.secret(webhook))


@router.get(
    "/{id:webhook_id}",
    summary="Read a webhook (A3)",
    response_model=Webhook,
    responses=error_responses(400, 401, 403, 404),
)
async def get_webhook(
    caller: WebhookReader, webhook_id: WebhookId, session: ReadSessionDep
) -> Webhook:
    webhook = await service.get_webhook(
        session, customer_id=caller.customer_id, webhook_id=webhook_id
    )
    return Webhook.of(webhook)


@router.put(
    "/{id:webhook_id}",
    summary="Update a webhook (A4)",
    description="Fields sent replace the stored ones; fields left out keep their values.",
    response_model=Webhook,
    responses=error_responses(400, 401, 403, 404, 413, 415),
)
async def update_webhook(
    caller: WebhookWriter,
    _json: JsonContent,
    webhook_id: WebhookId,
    body: WebhookUpdate,
    settings: SettingsDep,
    database: DatabaseDep,
) -> Webhook:
    if body.target_url is not None:  # before the session, as on create
        await service.check_target(body.target_url, settings)
    async with database.session() as session:
        webhook = await service.update_webhook(
            session, customer_id=caller.customer_id, webhook_id=webhook_id, data=body
        )
        await session.commit()
    return Webhook.of(webhook)


@router.get(
    "/{id:webhook_id}/delivery-status",
    summary="Read how deliveries to a webhook are going",
    description="Failing since when, last success, and whether (and why) Tucano deactivated it "
    "after every delivery failed for TUCANO_WEBHOOK_DEACTIVATE_AFTER (default 5 days).",
    response_model=WebhookDeliveryStatus,
    responses=error_responses(400, 401, 403, 404),
)
async def get_delivery_status(
    caller: WebhookReader, webhook_id: WebhookId, session: ReadSessionDep
) -> WebhookDeliveryStatus:
    webhook = await service.get_webhook(
        session, customer_id=caller.customer_id, webhook_id=webhook_id
    )
    return WebhookDeliveryStatus.of(webhook)


@router.get(
    "/{id:webhook_id}/secret",
    summary="Read a webhook's signing secret",
    description="Needs `webhook.write`, as creating and rotating do: whoever holds the secret "
    "can sign events the receiver will trust, which a read-only token must not allow.",
    response_model=WebhookSecret,
    responses=error_responses(400, 401, 403, 404),
)
async def get_secret(
    caller: WebhookWriter, webhook_id: WebhookId, store: SecretStoreDep, session: ReadSessionDep
) -> WebhookSecret:
    webhook = await service.get_webhook(
        session, customer_id=caller.customer_id, webhook_id=webhook_id
    )
    return _secret_of(webhook, store)


@router.post(
    "/{id:webhook_id}/secret/rotate",
    summary="Rotate a webhook's signing secret",
    description="The secret it replaces keeps signing deliveries beside the new one for 24 "
    "hours, as do secrets replaced earlier whose 24 hours have not passed (at most 9).",
    response_model=WebhookSecret,
    responses=error_responses(400, 401, 403, 404, 415),
)
async def rotate_secret(
    caller: WebhookWriter,
    _json: JsonContent,
    webhook_id: WebhookId,
    store: SecretStoreDep,
    session: SessionDep,
) -> WebhookSecret:
    webhook = await service.rotate_secret(
        session, customer_id=caller.customer_id, webhook_id=webhook_id, secret_store=store
    )
    await session.commit()
    return _secret_of(webhook, store)


def _secret_of(webhook: WebhookRow, store: WebhookSecretStore) -> WebhookSecret:
    return WebhookSecret.of(
        secret=store.secret(webhook),
        stored_previous=store.previous_secrets(webhook),
        now=clock.now(),
    )
