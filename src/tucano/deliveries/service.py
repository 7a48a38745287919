"""The outbox and its queue: publishing events, claiming due deliveries, recording attempts,
listing results, redelivering and pruning.

`publish_event` is the one way in for every event: it writes the event and one delivery per
matching active webhook with the caller's session, so they commit (or not) together with the
business change that caused them. Workers then claim due deliveries under a short lease,
send outside any transaction, and record outcomes in batches.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from pydantic import BaseModel
from sqlalchemy import Select, Table, bindparam, delete, func, select, text, union_all, update
from sqlalchemy.ext.asyncio import AsyncSession

from tucano import wire
from tucano.clock import clock
from tucano.db import call_after_commit, insert_many
from tucano.deliveries.models import (
    FIRST_ATTEMPT_QUEUE,
    RETRY_QUEUE,
    Delivery,
    DeliveryResult,
    DeliveryStatus,
    Event,
    ResultStatus,
)
from tucano.deliveries.wakeup import NOTIFY_CHANNEL, wakeup
from tucano.errors import AppError, ErrorCode, NotFound
from tucano.pagination import PageRequest
from tucano.webhooks import service as webhooks
from tucano.webhooks.events import EventType
from tucano.webhooks.models import Webhook

_EVENTS = cast(Table, Event.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)
_RESULTS = cast(Table, DeliveryResult.__table__)


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


async def _announce(session: AsyncSession) -> None:
    """Wake workers once this transaction commits: in this process directly, in others through
    PostgreSQL's NOTIFY (which PostgreSQL itself only delivers on commit)."""
    call_after_commit(session, "deliveries.wakeup", wakeup.notify)
    if session.get_bind().dialect.name == "postgresql":
        # Repeats within one transaction are folded into one notification by PostgreSQL.
        await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": NOTIFY_CHANNEL})


@dataclass(frozen=True)
class NewEvent:
    customer_id: int
    event_type: EventType
    payload: BaseModel


async def publish_events(
    session: AsyncSession, events: Sequence[NewEvent]
) -> list[tuple[Event, int]]:
    """Store events, and a delivery of each to every active webhook of its customer for its
    type, in the caller's transaction (the outbox). Returns each event with how many deliveries
    were queued. A few statements whatever the number of events."""
    now = clock.now()
    stored = [
        Event(
            id=new_event_id(),
            customer_id=e.customer_id,
            event_type=e.event_type.value,
            payload=wire.dumps(e.payload).decode(),
            created_at=now,
        )
        for e in events
    ]
    await insert_many(
        session,
        _EVENTS,
        [
            {
                "id": e.id,
                "customer_id": e.customer_id,
                "event_type": e.event_type,
                "payload": e.payload,
                "created_at": now,
            }
            for e in stored
        ],
    )
    subscribers = await webhooks.active_webhook_ids_by_subscription(
        session, {(e.customer_id, e.event_type) for e in events}
    )
    queued = []
    for event in stored:
        webhook_ids = subscribers.get((event.customer_id, EventType(event.event_type)), [])
        queued.append((event, len(webhook_ids)))
    await _queue_deliveries(
        session,
        [
            (event, webhook_id)
            for event in stored
            for webhook_id in subscribers.get((event.customer_id, EventType(event.event_type)), [])
        ],
        now=now,
    )
    return queued


async def publish_event(
    session: AsyncSession, *, customer_id: int, event_type: EventType, payload: BaseModel
) -> tuple[Event, int]:
    """Store one event and its deliveries in the caller's transaction (see publish_events)."""
    (published,) = await publish_events(session, [NewEvent(customer_id, event_type, payload)])
    return published


async def _queue_deliveries(
    session: AsyncSession, targets: Sequence[tuple[Event, int]], *, now: datetime
) -> None:
    if not targets:
        return
    await insert_many(
        session,
        _DELIVERIES,
        [
            {
                "event_id": event.id,
                "webhook_id": webhook_id,
                "customer_id": event.customer_id,
                "status": DeliveryStatus.PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
                "updated_at": now,
            }
            for event, webhook_id in targets
        ],
    )
    await _announce(session)


async def redeliver(
    session: AsyncSession, *, customer_id: int, webhook_id: int, event_id: str
) -> Event:
    """Queue one more delivery of one of the customer's events to one of its webhooks."""
    webhook = await webhooks.get_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
    event = await session.scalar(
        select(Event).where(Event.id == event_id, Event.customer_id == customer_id)
    )
    if event is None:
        raise NotFound(ErrorCode.EVENT_NOT_FOUND)
    if event.event_type != webhook.event_type:
        raise AppError(
            ErrorCode.WEBHOOK_EVENT_MISMATCH,
            errors=[
                f"event {event.id} is a {event.event_type} event; "
                f"webhook {webhook.id} receives {webhook.event_type}"
            ],
        )
    if not webhook.is_active:
        raise AppError(
            ErrorCode.WEBHOOK_INACTIVE,
            errors=[f"webhook {webhook.id} is inactive; activate it (PUT isActive) first"],
        )
    await _queue_deliveries(session, [(event, webhook.id)], now=clock.now())
    return event


# --- the worker's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimedDelivery:
    delivery_id: int
    claim_token: str
    event_id: str
    event_type: str
    customer_id: int
    webhook_id: int
    attempt: int  # the number of the attempt about to be made, 1-based
    payload: bytes
    target: webhooks.DeliveryTarget | None  # None when the webhook is gone


def _due(
    queue: str, *, limit: int, now: datetime, exclude_webhooks: Sequence[int]
) -> Select[tuple[int]]:
    # The queue is spelled exactly as its partial index's condition, as a literal: a planner
    # uses a partial index only when it can prove the query implies its condition.
    d = _DELIVERIES.c
    due: Select[tuple[int]] = (
        select(d.id)
        .where(text(queue), d.next_attempt_at <= now)
        .order_by(d.next_attempt_at)
        .limit(limit)
    )
    if exclude_webhooks:
        due = due.where(d.webhook_id.not_in(exclude_webhooks))
    return due


# Core tables and columns, not ORM attributes: on this path the ORM's per-statement and
# per-row machinery costs more than the database does.
_WEBHOOKS = cast(Table, Webhook.__table__)
_CLAIMED_COLUMNS = (
    _DELIVERIES.c.id,
    _DELIVERIES.c.event_id,
    _DELIVERIES.c.webhook_id,
    _DELIVERIES.c.customer_id,
    _DELIVERIES.c.attempts,
)
# What a worker needs to send a claimed delivery. Read in the same statement as the claim on
# PostgreSQL (one round trip); the webhook columns are read here, rather than through the
# webhooks service, because this is the hot path of every delivery.
_DELIVERY_CONTEXT = (
    _EVENTS.c.event_type,
    _EVENTS.c.payload,
    _WEBHOOKS.c.target_url,
    _WEBHOOKS.c.is_active,
    _WEBHOOKS.c.secret,
    _WEBHOOKS.c.previous_secret,
    _WEBHOOKS.c.previous_secret_expires_at,
)


async def claim_due_deliveries(
    session: AsyncSession,
    *,
    limit: int,
    lease: timedelta,
    exclude_webhooks: Sequence[int] = (),
) -> list[ClaimedDelivery]:
    """Take up to `limit` due deliveries for this worker until `lease` runs out.

    A quarter of each batch is kept for retries and the rest for first attempts, so a backlog of
    retries to a failing receiver cannot hold back new events, nor new events starve retries.
    PostgreSQL skips rows other workers hold (FOR UPDATE SKIP LOCKED); on SQLite the claim runs
    under the database's write lock.
    """
    now = clock.now()
    token = secrets.token_hex(16)
    retries = max(1, limit // 4)
    postgres = session.get_bind().dialect.name == "postgresql"
    branches = []
    for queue, size in ((RETRY_QUEUE, retries), (FIRST_ATTEMPT_QUEUE, limit - retries)):
        due = _due(queue, limit=size, now=now, exclude_webhooks=exclude_webhooks)
        if postgres:
            due = due.with_for_update(skip_locked=True)
        branches.append(select(due.subquery().c.id))
    d = _DELIVERIES.c
    claim = (
        update(_DELIVERIES)
        .where(d.id.in_(union_all(*branches)))
        .values(next_attempt_at=now + lease, claim_token=token, updated_at=now)
        .returning(*_CLAIMED_COLUMNS)
    )
    if postgres:
        claimed = claim.cte("claimed")
        rows = list(
            await session.execute(
                select(*claimed.c, *_DELIVERY_CONTEXT)
                .select_from(claimed)
                .join(_EVENTS, _EVENTS.c.id == claimed.c.event_id)
                .outerjoin(_WEBHOOKS, _WEBHOOKS.c.id == claimed.c.webhook_id)
            )
        )
    else:  # SQLite's RETURNING cannot reach other tables, and it has no UPDATE in a CTE
        ids = [row[0] for row in await session.execute(claim)]
        rows = (
            list(
                await session.execute(
                    select(*_CLAIMED_COLUMNS, *_DELIVERY_CONTEXT)
                    .select_from(_DELIVERIES)
                    .join(_EVENTS, _EVENTS.c.id == d.event_id)
                    .outerjoin(_WEBHOOKS, _WEBHOOKS.c.id == d.webhook_id)
                    .where(d.id.in_(ids))
                )
            )
            if ids
            else []
        )
    claimed_deliveries = []
    for (
        delivery_id,
        event_id,
        webhook_id,
        customer_id,
        attempts,
        event_type,
        payload,
        url,
        active,
        secret,
        previous,
        previous_until,
    ) in rows:
        target = None
        if url is not None:
            signing: tuple[str, ...] = (secret,)
            if previous and previous_until is not None and previous_until > now:
                signing = (secret, previous)
            target = webhooks.DeliveryTarget(webhook_id, url, active, signing)
        claimed_deliveries.append(
            ClaimedDelivery(
                delivery_id=delivery_id,
                claim_token=token,
                event_id=event_id,
                event_type=event_type,
                customer_id=customer_id,
                webhook_id=webhook_id,
                attempt=attempts + 1,
                payload=payload.encode(),
                target=target,
            )
        )
    return claimed_deliveries


@dataclass(frozen=True)
class Outcome:
    """What happened to one claimed delivery, ready to be recorded."""

    claimed: ClaimedDelivery
    status: str  # a ResultStatus
    target_url: str
    http_status: int | None
    response_body: str | None
    error_message: str | None
    duration_ms: int
    attempted_at: datetime
    next_attempt_at: datetime | None


_DELIVERY_STATUS_AFTER = {
    ResultStatus.SUCCESS: DeliveryStatus.SUCCEEDED,
    ResultStatus.PENDING_RETRY: DeliveryStatus.PENDING,
    ResultStatus.EXHAUSTED: DeliveryStatus.EXHAUSTED,
    ResultStatus.FAILED: DeliveryStatus.CANCELLED,
}


async def record_outcomes(session: AsyncSession, outcomes: Sequence[Outcome]) -> None:
    """Write a batch of attempts: their result rows, their deliveries' new state (only where this
    worker still holds the claim), and the webhooks' delivery health. A handful of statements
    per batch: set-based updates by claim and status, per-row ones only for retries."""
    if not outcomes:
        return
    now = clock.now()
    await insert_many(
        session,
        _RESULTS,
        [
            {
                "delivery_id": o.claimed.delivery_id,
                "customer_id": o.claimed.customer_id,
                "webhook_id": o.claimed.webhook_id,
                "event_id": o.claimed.event_id,
                "event_type": o.claimed.event_type,
                "target_url": o.target_url,
                "attempt": o.claimed.attempt,
                "status": o.status,
                "http_status": o.http_status,
                "response_body": o.response_body,
                "error_message": o.error_message,
                "duration_ms": o.duration_ms,
                "attempted_at": o.attempted_at,
                "next_attempt_at": o.next_attempt_at,
            }
            for o in outcomes
        ],
    )
    table = _DELIVERIES
    finished: dict[tuple[str, str], list[int]] = {}
    retries = []
    for o in outcomes:
        if o.status == ResultStatus.PENDING_RETRY:
            retries.append(o)
        else:
            key = (o.claimed.claim_token, _DELIVERY_STATUS_AFTER[o.status])
            finished.setdefault(key, []).append(o.claimed.delivery_id)
    for (token, status), ids in finished.items():
        await session.execute(
            update(table)
            .where(table.c.claim_token == token, table.c.id.in_(ids))
            .values(
                status=status,
                attempts=table.c.attempts + 1,
                next_attempt_at=None,
                claim_token=None,
                updated_at=now,
            )
        )
    if retries:
        await session.execute(
            update(table)
            .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
            .values(
                attempts=table.c.attempts + 1,
                next_attempt_at=bindparam("b_next"),
                claim_token=None,
                updated_at=now,
            ),
            [
                {
                    "b_id": o.claimed.delivery_id,
                    "b_token": o.claimed.claim_token,
                    "b_next": o.next_attempt_at,
                }
                for o in retries
            ],
        )
    succeeded = {o.claimed.webhook_id for o in outcomes if o.status == ResultStatus.SUCCESS}
    failed = {
        o.claimed.webhook_id
        for o in outcomes
        if o.status in (ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED)
    }
    await webhooks.record_delivery_health(
        session,
        succeeded=succeeded,
        failed=failed - succeeded,
        at=min(o.attempted_at for o in outcomes),
    )


async def release_claims(
    session: AsyncSession, claims: Sequence[ClaimedDelivery], *, due_at: datetime
) -> None:
    """Give claimed deliveries back, unattempted, due again at `due_at`."""
    if not claims:
        return
    table = _DELIVERIES
    await session.execute(
        update(table)
        .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
        .values(next_attempt_at=due_at, claim_token=None),
        [{"b_id": c.delivery_id, "b_token": c.claim_token} for c in claims],
    )


# --- history --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultFilters:
    event_type: EventType | None = None
    webhook_id: int | None = None
    status: str | None = None
    start: datetime | None = None
    end: datetime | None = None


async def list_results(
    session: AsyncSession, *, customer_id: int, filters: ResultFilters, page: PageRequest
) -> tuple[Sequence[DeliveryResult], int]:
    condition = [DeliveryResult.customer_id == customer_id]
    if filters.event_type is not None:
        condition.append(DeliveryResult.event_type == filters.event_type.value)
    if filters.webhook_id is not None:
        condition.append(DeliveryResult.webhook_id == filters.webhook_id)
    if filters.status is not None:
        condition.append(DeliveryResult.status == filters.status)
    if filters.start is not None:
        condition.append(DeliveryResult.attempted_at >= filters.start)
    if filters.end is not None:
        condition.append(DeliveryResult.attempted_at <= filters.end)
    total = (
        await session.scalar(select(func.count()).select_from(DeliveryResult).where(*condition))
        or 0
    )
    if page.offset >= total:
        return [], total
    rows = await session.scalars(
        select(DeliveryResult)
        .where(*condition)
        .order_by(DeliveryResult.attempted_at.desc(), DeliveryResult.id.desc())
        .offset(page.offset)
        .limit(page.size)
    )
    return rows.all(), total


async def prune_history(
    session: AsyncSession, *, older_than: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of results, and of finished events, from before `older_than`; returns
    how many rows went (the scheduler calls again while there are more)."""
    old_results = (
        select(DeliveryResult.id)
        .where(DeliveryResult.attempted_at < older_than)
        .limit(batch_size)
        .scalar_subquery()
    )
    removed = (
        await session.execute(delete(DeliveryResult).where(DeliveryResult.id.in_(old_results)))
    ).rowcount or 0  # type: ignore[attr-defined]
    unfinished = select(Delivery.id).where(
        Delivery.event_id == Event.id, Delivery.status == DeliveryStatus.PENDING
    )
    old_events = (
        select(Event.id)
        .where(Event.created_at < older_than, ~unfinished.exists())
        .limit(batch_size)
        .scalar_subquery()
    )
    removed += (await session.execute(delete(Event).where(Event.id.in_(old_events)))).rowcount or 0  # type: ignore[attr-defined]
    return int(removed)
