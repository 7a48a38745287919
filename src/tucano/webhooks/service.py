"""Webhook registrations of one customer: create, read, list, update, delete, secrets."""

from __future__ import annotations

import base64
import functools
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.auth.tokens import Principal
from tucano.config import Settings
from tucano.core.clock import clock
from tucano.core.errors import BadRequest, Conflict, ErrorCode, NotFound
from tucano.core.paging import PageRequest
from tucano.db.database import Database, call_after_commit
from tucano.db.notifications import notify
from tucano.events.types import EventType
from tucano.webhooks.changes import (
    WEBHOOK_CHANNEL,
    WebhookChange,
    WebhookChanges,
    webhook_changes,
)
from tucano.webhooks.models import Webhook
from tucano.webhooks.repository import WebhookRepository
from tucano.webhooks.schemas import WebhookCreate, WebhookUpdate
from tucano.webhooks.secret_store import WebhookSecretStore
from tucano.webhooks.signing import after_rotation
from tucano.webhooks.url_safety import TargetRefused, check_target_url


def new_signing_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


async def check_target(url: str, settings: Settings) -> None:
    """Refuse (400) a target URL that is malformed or points at a non-public address."""
    try:
        await check_target_url(
            url,
            allow_http=settings.is_sandbox,
            allowed_networks=settings.webhook_allowed_networks,
            dns_timeout=settings.dns_timeout_seconds,
        )
    except TargetRefused as exc:
        raise BadRequest(f"targetUrl {exc}", code=ErrorCode.WEBHOOK_TARGET_REFUSED) from None


async def list_webhooks(
    database: Database,
    *,
    customer_id: int,
    event_type: EventType | None,
    page: PageRequest,
) -> tuple[Sequence[Any], int]:
    """A page of the customer's webhooks (rows with the table's column names), and how many
    the customer has (of `event_type`, if given)."""
    return await WebhookRepository.page_of(
        database,
        customer_id=customer_id,
        event_type=event_type,
        offset=page.offset,
        limit=page.size,
    )


async def get_webhook(
    session: AsyncSession, *, customer_id: int, webhook_id: int, for_update: bool = False
) -> Webhook:
    """The customer's webhook; another customer's is answered exactly like a missing one.
    `for_update` locks it until the transaction ends."""
    webhook = await WebhookRepository(session).get(
        customer_id=customer_id, webhook_id=webhook_id, for_update=for_update
    )
    if webhook is None:
        raise NotFound(ErrorCode.WEBHOOK_NOT_FOUND)
    return webhook


async def create_webhook(
    session: AsyncSession,
    *,
    caller: Principal,
    data: WebhookCreate,
    settings: Settings,
    secret_store: WebhookSecretStore,
) -> Webhook:
    """A new webhook, its signing secret sealed (`secret_store.secret` reads it). The caller
    has checked its target (check_target) before opening the session."""
    repository = WebhookRepository(session)
    limit = settings.max_webhooks_per_customer
    if await repository.count_with_lock(caller.customer_id) >= limit:
        raise Conflict(
            ErrorCode.WEBHOOK_LIMIT_REACHED,
            f"a customer may have at most {limit} webhooks (TUCANO_MAX_WEBHOOKS_PER_CUSTOMER); "
            "delete one before creating another",
        )
    now = clock.now()
    webhook = Webhook(
        customer_id=caller.customer_id,
        # Omitted: the caller's partner. An explicit null means no partner, as on PUT.
        partner_id=data.partner_id if "partner_id" in data.model_fields_set else caller.partner_id,
        target_url=data.target_url,
        event_type=data.event_type.value,
        is_active=data.is_active,
        secret="",  # sealed below: the sealed value is bound to the row's id
        created_at=now,
        updated_at=now,
    )
    await repository.add(webhook)
    secret_store.seal(webhook, secret=new_signing_secret(), previous_secrets=None)
    await session.flush()
    return webhook


async def update_webhook(
    session: AsyncSession,
    *,
    customer_id: int,
    webhook_id: int,
    data: WebhookUpdate,
) -> Webhook:
    """Change the fields `data` sends (the caller has checked a new target with check_target
    before opening the session)."""
    # Locked, so that a delete at the same moment waits for this change or makes it a 404.
    webhook = await get_webhook(
        session, customer_id=customer_id, webhook_id=webhook_id, for_update=True
    )
    sent = data.model_fields_set
    if "partner_id" in sent:
        webhook.partner_id = data.partner_id
    if data.target_url is not None:
        webhook.target_url = data.target_url
    if data.event_type is not None:
        webhook.event_type = data.event_type.value
    if data.is_active is not None:
        if data.is_active and not webhook.is_active:
            # Switched back on by its owner: a fresh start, whatever happened before.
            webhook.failing_since = None
            webhook.deactivated_at = None
            webhook.deactivation_reason = None
        webhook.is_active = data.is_active
    webhook.updated_at = clock.now()
    await session.flush()
    await announce_change(session, webhook_id, deleted=False)
    return webhook


async def delete_webhook(session: AsyncSession, *, customer_id: int, webhook_id: int) -> None:
    """Delete the registration alone (deliveries.service.delete_webhook also takes its pending
    deliveries off the queue, as the API does)."""
    if not await WebhookRepository(session).delete(customer_id=customer_id, webhook_id=webhook_id):
        raise NotFound(ErrorCode.WEBHOOK_NOT_FOUND)
    await announce_change(session, webhook_id, deleted=True)


async def rotate_secret(
    session: AsyncSession, *, customer_id: int, webhook_id: int, secret_store: WebhookSecretStore
) -> Webhook:
    """A new signing secret; the one it replaces keeps signing beside it for 24 hours, as do
    those replaced earlier whose grace has not ended (see signing.after_rotation)."""
    webhook = await get_webhook(
        session, customer_id=customer_id, webhook_id=webhook_id, for_update=True
    )
    now = clock.now()
    replaced = secret_store.secret(webhook)
    previous = after_rotation(secret_store.previous_secrets(webhook), replaced, now=now)
    secret_store.seal(webhook, secret=new_signing_secret(), previous_secrets=previous)
    webhook.updated_at = now
    await session.flush()
    await announce_change(session, webhook_id, deleted=False)
    return webhook


async def announce_change(session: AsyncSession, webhook_id: int, *, deleted: bool) -> None:
    """Tell delivery workers, once this transaction commits, that a webhook changed (URL,
    secret, state) or was deleted: they drop what they hold for it under the old values."""
    await announce_changes(session, [webhook_id], deleted=deleted)


async def announce_changes(
    session: AsyncSession, webhook_ids: Sequence[int], *, deleted: bool
) -> None:
    """announce_change for several webhooks: in this process after the commit, and to the
    others on the database's notifications."""
    changes = [WebhookChange(webhook_id, deleted) for webhook_id in webhook_ids]
    for change in changes:
        call_after_commit(
            session,
            f"webhooks.change.{change.webhook_id}",
            functools.partial(webhook_changes.notify, change),
        )
    if changes:
        await notify(session, WEBHOOK_CHANNEL, [WebhookChanges.encode(c) for c in changes])


# --- what the delivery engine needs from webhooks ---------------------------------------------


async def deactivate_failing_webhooks(
    session: AsyncSession, *, failing_for: timedelta, now: datetime
) -> list[int]:
    """Deactivate every active webhook whose deliveries have all failed for `failing_for`
    (a success recorded meanwhile keeps it on); the ids of those this call switched off."""
    reason = f"every delivery failed for {_describe(failing_for)}; deactivated automatically"
    ids = await WebhookRepository(session).deactivate_failing(
        failing_since=now - failing_for, reason=reason, now=now
    )
    await announce_changes(session, ids, deleted=False)
    return ids


async def reseal_all(session: AsyncSession, store: WebhookSecretStore) -> int:
    """Seal every webhook's secrets under the current key where another key sealed them (every
    customer's: an operator's command); how many webhooks changed. Rows are locked so that a
    rotation at the same moment waits."""
    webhooks = await WebhookRepository(session).every_webhook_for_update()
    resealed = sum(store.reseal(webhook) for webhook in webhooks)
    await session.flush()
    return resealed


def _describe(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"
