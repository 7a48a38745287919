"""Webhook registrations of one customer: create, read, list, update, delete, secrets."""

from __future__ import annotations

import base64
import functools
import secrets
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import Select, Table, bindparam, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.auth.tokens import Principal
from tucano.config import Settings
from tucano.core.clock import clock
from tucano.core.errors import BadRequest, Conflict, ErrorCode, NotFound
from tucano.core.paging import PageRequest
from tucano.db.bulk import in_parts
from tucano.db.compiled_reads import CompiledRead, compiled_read
from tucano.db.database import Database, call_after_commit
from tucano.events.types import EventType
from tucano.webhooks.changes import (
    WEBHOOK_CHANNEL,
    WebhookChange,
    WebhookChanges,
    webhook_changes,
)
from tucano.webhooks.models import Webhook
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


WEBHOOKS = cast(Table, Webhook.__table__)


def _listed(*, by_event_type: bool) -> tuple[Select[Any], Select[Any]]:
    """The statements of a page of a customer's webhooks with how many there are in all
    (one snapshot on PostgreSQL: a customer has few webhooks, so counting them all beside the
    page costs nothing), and of the count alone, for a page past the last."""
    condition = [WEBHOOKS.c.customer_id == bindparam("customer")]
    if by_event_type:
        condition.append(WEBHOOKS.c.event_type == bindparam("event_type"))
    listed = (
        WEBHOOKS.c.id,
        WEBHOOKS.c.customer_id,
        WEBHOOKS.c.partner_id,
        WEBHOOKS.c.target_url,
        WEBHOOKS.c.event_type,
        WEBHOOKS.c.is_active,
    )
    page = (
        select(*listed, func.count().over().label("matched_total"))
        .where(*condition)
        .order_by(WEBHOOKS.c.id)
        .offset(bindparam("offset"))
        .limit(bindparam("limit"))
    )
    return page, select(func.count()).select_from(WEBHOOKS).where(*condition)


# Built once, with their parameters bound per request: on the hot path, SQLAlchemy's ORM and a
# statement built anew cost more than the statement (docs/performance.md).
_LISTED = {by_type: _listed(by_event_type=by_type) for by_type in (False, True)}
_ListedRow = NamedTuple(  # type: ignore[misc]  # the columns of a page, by name
    "_ListedRow", [(column.name, Any) for column in _LISTED[False][0].selected_columns]
)


class _CountRow(NamedTuple):
    total: int


# The same statements straight on the driver's connection, per database and filter.
_LISTED_COMPILED: dict[tuple[str, bool], tuple[CompiledRead, CompiledRead]] = {
    (dialect, by_type): (
        compiled_read(dialect, page, _ListedRow),
        compiled_read(dialect, count, _CountRow),
    )
    for dialect in ("sqlite", "postgresql")
    for by_type, (page, count) in _LISTED.items()
}


async def list_webhooks(
    database: Database,
    *,
    customer_id: int,
    event_type: EventType | None,
    page: PageRequest,
) -> tuple[Sequence[Any], int]:
    """A page of the customer's webhooks (rows with the table's column names), and how many
    the customer has (of `event_type`, if given)."""
    parameters = {
        "customer": customer_id,
        "event_type": None if event_type is None else event_type.value,
        "offset": page.offset,
        "limit": page.size,
    }
    page_read, count_read = _LISTED_COMPILED[database.dialect, event_type is not None]
    async with database.compiled_read_connection() as connection:
        listed = await page_read.all(connection, parameters)
        if listed:
            return listed, int(listed[0].matched_total)
        # Past the last page (or none): the total alone.
        counted = await count_read.first(connection, parameters)
    return [], int(counted.total if counted else 0)


async def get_webhook(
    session: AsyncSession, *, customer_id: int, webhook_id: int, for_update: bool = False
) -> Webhook:
    """The customer's webhook; another customer's is answered exactly like a missing one.
    `for_update` locks its row until the transaction ends (PostgreSQL; SQLite's write
    transactions hold the whole database already)."""
    query = select(Webhook).where(Webhook.id == webhook_id, Webhook.customer_id == customer_id)
    if for_update and session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update()
    webhook = await session.scalar(query)
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
    """A new webhook, its signing secret sealed (`secret_store.secret` reads it)."""
    await check_target(data.target_url, settings)
    await _refuse_over_the_limit(
        session, customer_id=caller.customer_id, limit=settings.max_webhooks_per_customer
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
    session.add(webhook)
    await session.flush()
    secret_store.seal(webhook, secret=new_signing_secret(), previous_secrets=None)
    await session.flush()
    return webhook


async def _refuse_over_the_limit(session: AsyncSession, *, customer_id: int, limit: int) -> None:
    """409 when the customer has `limit` webhooks already. Counted under a lock per customer
    held until the transaction ends, so two creates at the limit cannot both see room (on
    SQLite the write transaction holds the database already)."""
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"tucano.webhooks.of_customer.{customer_id}"},
        )
    count = await session.scalar(
        select(func.count()).select_from(Webhook).where(Webhook.customer_id == customer_id)
    )
    if int(count or 0) >= limit:
        raise Conflict(
            ErrorCode.WEBHOOK_LIMIT_REACHED,
            f"a customer may have at most {limit} webhooks (TUCANO_MAX_WEBHOOKS_PER_CUSTOMER); "
            "delete one before creating another",
        )


async def update_webhook(
    session: AsyncSession,
    *,
    customer_id: int,
    webhook_id: int,
    data: WebhookUpdate,
    settings: Settings,
) -> Webhook:
    if data.target_url is not None:
        await check_target(data.target_url, settings)
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
    result = await session.execute(
        delete(Webhook).where(Webhook.id == webhook_id, Webhook.customer_id == customer_id)
    )
    if getattr(result, "rowcount", 0) == 0:
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
    """announce_change for several webhooks: one statement on PostgreSQL however many (one per
    webhook was far too slow for a mass deactivation: docs/adr/database.md)."""
    changes = [WebhookChange(webhook_id, deleted) for webhook_id in webhook_ids]
    for change in changes:
        call_after_commit(
            session,
            f"webhooks.change.{change.webhook_id}",
            functools.partial(webhook_changes.notify, change),
        )
    if changes and session.get_bind().dialect.name == "postgresql":
        await session.execute(
            text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) AS p"),
            {"channel": WEBHOOK_CHANNEL, "payloads": [WebhookChanges.encode(c) for c in changes]},
        )


# --- what the delivery engine needs from webhooks ---------------------------------------------


async def existing_webhook_ids(session: AsyncSession, webhook_ids: Iterable[int]) -> set[int]:
    """Which of these webhooks still exist (the others were deleted)."""
    existing: set[int] = set()
    for part in in_parts(list(set(webhook_ids))):
        existing.update(await session.scalars(select(Webhook.id).where(Webhook.id.in_(part))))
    return existing


class DeliveryTarget(NamedTuple):
    webhook_id: int
    target_url: str
    is_active: bool
    # Every secret that signs right now: the current one, then those in their grace.
    signing_secrets: tuple[str, ...]
    # What it receives now (a PUT may have changed it since a delivery was queued).
    event_type: str


async def deactivate_failing_webhooks(
    session: AsyncSession, *, failing_for: timedelta, now: datetime
) -> list[int]:
    """Deactivate every active webhook whose deliveries have all failed for `failing_for`.

    One statement that checks and switches off together: a success recorded meanwhile (it ends
    the failing run) keeps the webhook on, and of several processes running this job at once
    only the one that switched a webhook off reports it."""
    cutoff = now - failing_for
    reason = f"every delivery failed for {_describe(failing_for)}; deactivated automatically"
    ids = list(
        await session.scalars(
            update(Webhook)
            .where(
                Webhook.is_active.is_(True),
                Webhook.failing_since.is_not(None),
                Webhook.failing_since <= cutoff,
            )
            .values(is_active=False, deactivated_at=now, deactivation_reason=reason, updated_at=now)
            .returning(Webhook.id),
            execution_options={"synchronize_session": False},
        )
    )
    await announce_changes(session, ids, deleted=False)
    return ids


def _describe(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"
