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
from sqlalchemy import Table, bindparam, delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from tucano import wire
from tucano.clock import clock
from tucano.db import call_after_commit
from tucano.deliveries.models import (
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


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


async def _announce(session: AsyncSession) -> None:
    """Wake workers once this transaction commits: in this process directly, in others through
    PostgreSQL's NOTIFY (which PostgreSQL itself only delivers on commit)."""
    call_after_commit(session, "deliveries.wakeup", wakeup.notify)
    if session.get_bind().dialect.name == "postgresql":
        # Repeats within one transaction are folded into one notification by PostgreSQL.
        await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": NOTIFY_CHANNEL})


async def publish_event(
    session: AsyncSession,
    *,
    customer_id: int,
    event_type: EventType,
    payload: BaseModel,
) -> tuple[Event, int]:
    """Store an event and a delivery to each active webhook of the customer for its type, in the
    caller's transaction. Returns the event and how many deliveries were queued."""
    now = clock.now()
    event = Event(
        id=new_event_id(),
        customer_id=customer_id,
        event_type=event_type.value,
        payload=wire.dumps(payload).decode(),
        created_at=now,
    )
    session.add(event)
    await session.flush()
    webhook_ids = await webhooks.active_webhook_ids(
        session, customer_id=customer_id, event_type=event_type
    )
    await _queue_deliveries(session, event=event, webhook_ids=webhook_ids, now=now)
    return event, len(webhook_ids)


async def _queue_deliveries(
    session: AsyncSession, *, event: Event, webhook_ids: Sequence[int], now: datetime
) -> None:
    if not webhook_ids:
        return
    await session.execute(
        insert(Delivery),
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
            for webhook_id in webhook_ids
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
    await _queue_deliveries(session, event=event, webhook_ids=[webhook.id], now=clock.now())
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


async def _claim(
    session: AsyncSession,
    *,
    retries: bool,
    limit: int,
    lease_until: datetime,
    token: str,
    now: datetime,
    exclude_webhooks: Sequence[int],
) -> list[tuple[int, str, int, int, int]]:
    if limit <= 0:
        return []
    due = (
        select(Delivery.id)
        .where(
            Delivery.status == DeliveryStatus.PENDING,
            Delivery.next_attempt_at <= now,
            Delivery.attempts > 0 if retries else Delivery.attempts == 0,
        )
        .order_by(Delivery.next_attempt_at)
        .limit(limit)
    )
    if exclude_webhooks:
        due = due.where(Delivery.webhook_id.not_in(exclude_webhooks))
    if session.get_bind().dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    claimed = await session.execute(
        update(Delivery)
        .where(Delivery.id.in_(due.scalar_subquery()))
        .values(next_attempt_at=lease_until, claim_token=token, updated_at=now)
        .returning(
            Delivery.id,
            Delivery.event_id,
            Delivery.webhook_id,
            Delivery.customer_id,
            Delivery.attempts,
        )
        .execution_options(synchronize_session=False)
    )
    return [tuple(row) for row in claimed]  # type: ignore[misc]


async def claim_due_deliveries(
    session: AsyncSession,
    *,
    limit: int,
    lease: timedelta,
    exclude_webhooks: Sequence[int] = (),
) -> list[ClaimedDelivery]:
    """Take up to `limit` due deliveries for this worker until `lease` runs out.

    A quarter of the batch is kept for retries, and first attempts get the rest: a backlog of
    retries to a failing receiver cannot hold back new events, nor can new events starve retries.
    """
    now = clock.now()
    token = secrets.token_hex(16)

    async def claim(*, retries: bool, limit: int) -> list[tuple[int, str, int, int, int]]:
        return await _claim(
            session,
            retries=retries,
            limit=limit,
            lease_until=now + lease,
            token=token,
            now=now,
            exclude_webhooks=exclude_webhooks,
        )

    rows = await claim(retries=True, limit=max(1, limit // 4))
    rows += await claim(retries=False, limit=limit - len(rows))
    if len(rows) < limit:
        rows += await claim(retries=True, limit=limit - len(rows))
    if not rows:
        return []
    events = {
        event_id: (event_type, payload)
        for event_id, event_type, payload in await session.execute(
            select(Event.id, Event.event_type, Event.payload).where(
                Event.id.in_({row[1] for row in rows})
            )
        )
    }
    targets = await webhooks.delivery_targets(session, {row[2] for row in rows}, now=now)
    return [
        ClaimedDelivery(
            delivery_id=delivery_id,
            claim_token=token,
            event_id=event_id,
            event_type=events[event_id][0],
            customer_id=customer_id,
            webhook_id=webhook_id,
            attempt=attempts + 1,
            payload=events[event_id][1].encode(),
            target=targets.get(webhook_id),
        )
        for delivery_id, event_id, webhook_id, customer_id, attempts in rows
    ]


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
    worker still holds the claim), and the webhooks' delivery health. A few statements per batch."""
    if not outcomes:
        return
    now = clock.now()
    await session.execute(
        insert(DeliveryResult),
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
    table = cast(Table, Delivery.__table__)
    await session.execute(
        update(table)
        .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
        .values(
            status=bindparam("b_status"),
            attempts=bindparam("b_attempts"),
            next_attempt_at=bindparam("b_next"),
            claim_token=None,
            updated_at=now,
        ),
        [
            {
                "b_id": o.claimed.delivery_id,
                "b_token": o.claimed.claim_token,
                "b_status": _DELIVERY_STATUS_AFTER[o.status],
                "b_attempts": o.claimed.attempt,
                "b_next": o.next_attempt_at,
            }
            for o in outcomes
        ],
    )
    succeeded: dict[int, datetime] = {}
    failed: dict[int, datetime] = {}
    for o in outcomes:
        if o.status == ResultStatus.SUCCESS:
            succeeded[o.claimed.webhook_id] = o.attempted_at
        elif o.status in (ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED):
            failed.setdefault(o.claimed.webhook_id, o.attempted_at)
    await webhooks.record_delivery_health(session, succeeded=succeeded, failed=failed)


async def release_claims(
    session: AsyncSession, claims: Sequence[ClaimedDelivery], *, due_at: datetime
) -> None:
    """Give claimed deliveries back, unattempted, due again at `due_at`."""
    if not claims:
        return
    table = cast(Table, Delivery.__table__)
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
