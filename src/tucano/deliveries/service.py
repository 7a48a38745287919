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
from typing import Any, cast

import structlog
from pydantic import BaseModel
from sqlalchemy import Select, Table, bindparam, delete, func, select, text, union_all, update
from sqlalchemy.ext.asyncio import AsyncSession

from tucano import wire
from tucano.clock import clock
from tucano.db import Database, call_after_commit, insert_many
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

log = structlog.get_logger("tucano.deliveries")

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
#
# Claiming, recording and releasing are the queue's own operations, not part of any business
# change, so each runs on its own rather than in a caller's session: on PostgreSQL as one
# statement through asyncpg in autocommit (atomic by itself: one round trip, and no
# SQLAlchemy per-row work, which cost more than PostgreSQL did on this path), on SQLite in one
# short transaction under the database's write lock.


@dataclass(frozen=True, slots=True)
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
    lease_until: datetime  # after this, another worker may claim it


# The queues are spelled exactly as their partial indexes' conditions: a planner uses a partial
# index only when it can prove the query implies its condition. Other workers' claims are
# skipped, not waited for. The webhook columns are read here, rather than through the webhooks
# service, because this is the hot path of every delivery.
_CLAIM_ON_POSTGRES = f"""
WITH retry AS (
    SELECT id FROM deliveries
     WHERE {RETRY_QUEUE} AND next_attempt_at <= $1 AND webhook_id <> ALL($5::bigint[])
     ORDER BY next_attempt_at LIMIT $2
       FOR UPDATE SKIP LOCKED
), fresh AS (
    SELECT id FROM deliveries
     WHERE {FIRST_ATTEMPT_QUEUE} AND next_attempt_at <= $1 AND webhook_id <> ALL($5::bigint[])
     ORDER BY next_attempt_at LIMIT $3
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE deliveries AS d
       SET next_attempt_at = $4, claim_token = $6, updated_at = $1
     WHERE d.id IN (SELECT id FROM retry UNION ALL SELECT id FROM fresh)
    RETURNING d.id, d.event_id, d.webhook_id, d.customer_id, d.attempts
)
SELECT c.id, c.event_id, c.webhook_id, c.customer_id, c.attempts, e.event_type, e.payload,
       w.target_url, w.is_active, w.secret, w.previous_secret, w.previous_secret_expires_at
  FROM claimed AS c
  JOIN events AS e ON e.id = c.event_id
  LEFT JOIN webhooks AS w ON w.id = c.webhook_id
"""  # noqa: S608 - our own constants

_WEBHOOKS = cast(Table, Webhook.__table__)
_CLAIMED_COLUMNS = (
    _DELIVERIES.c.id,
    _DELIVERIES.c.event_id,
    _DELIVERIES.c.webhook_id,
    _DELIVERIES.c.customer_id,
    _DELIVERIES.c.attempts,
)
_DELIVERY_CONTEXT = (
    _EVENTS.c.event_type,
    _EVENTS.c.payload,
    _WEBHOOKS.c.target_url,
    _WEBHOOKS.c.is_active,
    _WEBHOOKS.c.secret,
    _WEBHOOKS.c.previous_secret,
    _WEBHOOKS.c.previous_secret_expires_at,
)


def _due_on_sqlite(
    queue: str, *, limit: int, now: datetime, exclude_webhooks: Sequence[int]
) -> Select[tuple[int]]:
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


async def _claim_on_sqlite(
    database: Database,
    *,
    retries: int,
    fresh: int,
    now: datetime,
    until: datetime,
    token: str,
    exclude_webhooks: Sequence[int],
) -> Sequence[Any]:
    d = _DELIVERIES.c
    due = union_all(
        *(
            select(
                _due_on_sqlite(queue, limit=size, now=now, exclude_webhooks=exclude_webhooks)
                .subquery()
                .c.id
            )
            for queue, size in ((RETRY_QUEUE, retries), (FIRST_ATTEMPT_QUEUE, fresh))
        )
    )
    async with database.session() as session:
        # SQLite's RETURNING cannot reach other tables, and it has no UPDATE in a CTE.
        ids = [
            row[0]
            for row in await session.execute(
                update(_DELIVERIES)
                .where(d.id.in_(due))
                .values(next_attempt_at=until, claim_token=token, updated_at=now)
                .returning(d.id)
            )
        ]
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
        await session.commit()
    return rows


async def claim_due_deliveries(
    database: Database,
    *,
    limit: int,
    lease: timedelta,
    exclude_webhooks: Sequence[int] = (),
) -> list[ClaimedDelivery]:
    """Take up to `limit` due deliveries for this worker until `lease` runs out.

    A quarter of each batch is kept for retries and the rest for first attempts, so a backlog of
    retries to a failing receiver cannot hold back new events, nor new events starve retries.
    Deliveries of `exclude_webhooks` are left for others.
    """
    now = clock.now()
    token = secrets.token_hex(16)
    retries = max(1, limit // 4)
    if database.dialect == "postgresql":
        async with database.driver_connection() as connection:
            rows: Sequence[Any] = await connection.fetch(
                _CLAIM_ON_POSTGRES,
                now,
                retries,
                limit - retries,
                now + lease,
                list(exclude_webhooks),
                token,
            )
    else:
        rows = await _claim_on_sqlite(
            database,
            retries=retries,
            fresh=limit - retries,
            now=now,
            until=now + lease,
            token=token,
            exclude_webhooks=exclude_webhooks,
        )
    claimed = []
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
        claimed.append(
            ClaimedDelivery(
                delivery_id,
                token,
                event_id,
                event_type,
                customer_id,
                webhook_id,
                attempts + 1,
                payload.encode(),
                target,
                now + lease,
            )
        )
    return claimed


@dataclass(frozen=True, slots=True)
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

# One row per attempt, in columns: (name, PostgreSQL array type).
_OUTCOME_COLUMNS = (
    ("delivery_id", "bigint"),
    ("claim_token", "text"),
    ("customer_id", "bigint"),
    ("webhook_id", "bigint"),
    ("event_id", "text"),
    ("event_type", "text"),
    ("target_url", "text"),
    ("attempt", "int"),
    ("status", "text"),
    ("http_status", "int"),
    ("response_body", "text"),
    ("error_message", "text"),
    ("duration_ms", "int"),
    ("attempted_at", "timestamptz"),
    ("next_attempt_at", "timestamptz"),
    ("delivery_status", "text"),
)
_RESULT_COLUMNS = ", ".join(
    name for name, _ in _OUTCOME_COLUMNS if name not in ("claim_token", "delivery_status")
)
# The results, and the deliveries' new state (only where this worker still holds the claim: a
# late outcome after the lease ran out is history, but no longer moves the delivery).
_OUTCOME_ARRAYS = ", ".join(
    f"${i}::{kind}[]" for i, (_, kind) in enumerate(_OUTCOME_COLUMNS, start=1)
)
_RECORD_ON_POSTGRES = f"""
WITH outcome AS (
    SELECT * FROM unnest({_OUTCOME_ARRAYS})
        AS o({", ".join(name for name, _ in _OUTCOME_COLUMNS)})
), recorded AS (
    INSERT INTO delivery_results ({_RESULT_COLUMNS}) SELECT {_RESULT_COLUMNS} FROM outcome
)
UPDATE deliveries AS d
   SET status = o.delivery_status, attempts = d.attempts + 1, next_attempt_at = o.next_attempt_at,
       claim_token = NULL, updated_at = ${len(_OUTCOME_COLUMNS) + 1}
  FROM outcome AS o
 WHERE d.id = o.delivery_id AND d.claim_token = o.claim_token
"""  # noqa: S608 - our own column names


def _outcome_row(o: Outcome) -> tuple[Any, ...]:
    c = o.claimed
    return (
        c.delivery_id,
        c.claim_token,
        c.customer_id,
        c.webhook_id,
        c.event_id,
        c.event_type,
        o.target_url,
        c.attempt,
        o.status,
        o.http_status,
        o.response_body,
        o.error_message,
        o.duration_ms,
        o.attempted_at,
        o.next_attempt_at,
        _DELIVERY_STATUS_AFTER[o.status],
    )


async def _record_on_sqlite(database: Database, rows: list[tuple[Any, ...]], now: datetime) -> None:
    names = [name for name, _ in _OUTCOME_COLUMNS]
    result_names = _RESULT_COLUMNS.split(", ")
    table = _DELIVERIES
    async with database.session() as session:
        await insert_many(
            session,
            _RESULTS,
            [{name: row[names.index(name)] for name in result_names} for row in rows],
        )
        await session.execute(
            update(table)
            .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
            .values(
                status=bindparam("b_status"),
                attempts=table.c.attempts + 1,
                next_attempt_at=bindparam("b_next"),
                claim_token=None,
                updated_at=now,
            ),
            [
                {"b_id": row[0], "b_token": row[1], "b_status": row[15], "b_next": row[14]}
                for row in rows
            ],
        )
        await session.commit()


async def record_outcomes(database: Database, outcomes: Sequence[Outcome]) -> None:
    """Write a batch of attempts: their result rows, their deliveries' new state, and the
    webhooks' delivery health."""
    if not outcomes:
        return
    now = clock.now()
    rows = [_outcome_row(o) for o in outcomes]
    if database.dialect == "postgresql":
        async with database.driver_connection() as connection:
            await connection.execute(_RECORD_ON_POSTGRES, *map(list, zip(*rows, strict=True)), now)
    else:
        await _record_on_sqlite(database, rows, now)
    succeeded = {o.claimed.webhook_id for o in outcomes if o.status == ResultStatus.SUCCESS}
    failed = {
        o.claimed.webhook_id
        for o in outcomes
        if o.status in (ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED)
    }
    try:
        await webhooks.record_delivery_health(
            database,
            succeeded=succeeded,
            failed=failed - succeeded,
            at=min(o.attempted_at for o in outcomes),
        )
    except Exception:
        # The attempts are recorded; raising now would have the caller record them twice.
        log.exception("delivery_health_update_failed", webhooks=len(succeeded | failed))


async def release_claims(
    database: Database, claims: Sequence[ClaimedDelivery], *, due_at: datetime
) -> None:
    """Give claimed deliveries back, unattempted, due again at `due_at`."""
    if not claims:
        return
    table = _DELIVERIES
    async with database.session() as session:
        await session.execute(
            update(table)
            .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
            .values(next_attempt_at=due_at, claim_token=None),
            [{"b_id": c.delivery_id, "b_token": c.claim_token} for c in claims],
        )
        await session.commit()


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
