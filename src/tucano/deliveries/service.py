"""The outbox and its queue: publishing events, claiming due deliveries, recording attempts,
listing results, redelivering and pruning.

`publish_events` (and `publish_event`) is the way in for an event caused by a business change:
it writes the event and one delivery per matching active webhook with the caller's session, so
they commit (or not) together with that change. An event that is the whole of a change (the
events endpoint, test events) goes through `publish_events_alone`, the same writes committed on
their own. Workers then claim due deliveries under a short lease, send outside any transaction,
and record outcomes in batches.
"""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

import orjson
import structlog
from sqlalchemy import (
    Table,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.api.pagination import PageRequest
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode, NotFound
from tucano.db.bulk import in_parts, insert_many
from tucano.db.database import Database, call_after_commit
from tucano.db.sqlite_handover import immediate_transaction, run_on_sqlite
from tucano.deliveries import result_counts
from tucano.deliveries.models import (
    FIRST_ATTEMPT_QUEUE,
    RETRY_QUEUE,
    CancelledDelivery,
    Delivery,
    DeliveryResult,
    Event,
    ResultStatus,
)
from tucano.deliveries.worker.wakeup import NOTIFY_CHANNEL, wakeup
from tucano.events.payloads import Payload, published
from tucano.events.types import EventType
from tucano.webhooks import service as webhooks
from tucano.webhooks.signing import signing_secrets

log = structlog.get_logger("tucano.deliveries")

_EVENTS = cast(Table, Event.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)
_RESULTS = cast(Table, DeliveryResult.__table__)
_CANCELLED = cast(Table, CancelledDelivery.__table__)


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
    payload: Payload


class PublishedEvent(NamedTuple):
    id: str
    customer_id: int
    event_type: EventType
    created_at: datetime
    deliveries: int  # how many webhooks it was queued for


# PostgreSQL: the events, their fan-out to the customer's active webhooks of their type, and the
# deliveries, in one statement (the batch travels as one JSON array, as in the record below).
# The webhooks are locked against deletion until commit (FOR KEY SHARE): one deleted meanwhile
# is skipped rather than failing the insert of its delivery.
# The subscription is read here rather than through the webhooks service because every event
# takes this path.
_PUBLISH_ON_POSTGRES_TEMPLATE = """
WITH new_events AS (
    INSERT INTO events (id, customer_id, event_type, payload, created_at)
    SELECT r->>0, (r->>1)::bigint, r->>2, r->>3, CAST({now} AS timestamptz)
      FROM json_array_elements(CAST({events} AS json)) AS r
    RETURNING id, customer_id, event_type
), queued AS (
    INSERT INTO deliveries
        (event_id, webhook_id, customer_id, attempts, next_attempt_at, created_at, updated_at)
    SELECT e.id, w.id, e.customer_id, 0, CAST({now} AS timestamptz), CAST({now} AS timestamptz),
           CAST({now} AS timestamptz)
      FROM new_events AS e
      JOIN webhooks AS w
        ON w.customer_id = e.customer_id AND w.event_type = e.event_type AND w.is_active
       FOR KEY SHARE OF w
    RETURNING event_id
)
SELECT event_id, count(*){notify} FROM queued GROUP BY event_id
"""
_PUBLISH_ON_POSTGRES = text(
    _PUBLISH_ON_POSTGRES_TEMPLATE.format(now=":now", events=":events", notify="")
)
# The same, as a statement of its own in autocommit (publish_events_alone): it also wakes the
# workers of other processes, once (an uncorrelated subquery runs once), when it queued anything.
_PUBLISH_ALONE_ON_POSTGRES = _PUBLISH_ON_POSTGRES_TEMPLATE.format(
    now="$2", events="$1", notify=f", (SELECT pg_notify('{NOTIFY_CHANNEL}', ''))"
)


async def publish_events(session: AsyncSession, events: Sequence[NewEvent]) -> list[PublishedEvent]:
    """Store events, and a delivery of each to every active webhook of its customer for its
    type, in the caller's transaction (the outbox). One statement on PostgreSQL, a few on
    SQLite, whatever the number of events."""
    now = clock.now()
    rows = _event_rows(events)
    if session.get_bind().dialect.name == "postgresql":
        queued = dict(
            (
                await session.execute(
                    _PUBLISH_ON_POSTGRES, {"events": orjson.dumps(rows).decode(), "now": now}
                )
            ).all()
        )
    else:
        queued = await _publish_on_sqlite(session, rows, now)
    if queued:
        await _announce(session)
    return _published(rows, queued, now)


def _event_rows(events: Sequence[NewEvent]) -> list[tuple[str, int, str, str]]:
    """(id, customer, type, payload JSON) of each new event."""
    return [
        (
            new_event_id(),
            e.customer_id,
            e.event_type.value,
            json_codec.dumps(published(e.payload)).decode(),
        )
        for e in events
    ]


def _published(
    rows: list[tuple[str, int, str, str]], queued: dict[str, int], now: datetime
) -> list[PublishedEvent]:
    return [
        PublishedEvent(event_id, customer_id, EventType(event_type), now, queued.get(event_id, 0))
        for event_id, customer_id, event_type, _ in rows
    ]


# SQLite: the same as _PUBLISH_ON_POSTGRES in two statements, run on the driver's thread in one
# hand-over (db.run_on_sqlite), inside the caller's transaction.
_INSERT_EVENT_ON_SQLITE = (
    "INSERT INTO events (id, customer_id, event_type, payload, created_at) VALUES (?, ?, ?, ?, ?)"
)
_QUEUE_ON_SQLITE = """
INSERT INTO deliveries
    (event_id, webhook_id, customer_id, attempts, next_attempt_at, created_at, updated_at)
SELECT json_extract(e.value, '$[0]'), w.id, w.customer_id, 0, ?, ?, ?
  FROM json_each(?) AS e
  JOIN webhooks AS w
    ON w.customer_id = json_extract(e.value, '$[1]')
   AND w.event_type = json_extract(e.value, '$[2]') AND w.is_active
 ORDER BY e.key, w.id
RETURNING event_id
"""


async def _publish_on_sqlite(
    session: AsyncSession, rows: list[tuple[str, int, str, str]], now: datetime
) -> dict[str, int]:
    publish = _sqlite_publisher(rows, now, session.get_bind().dialect)
    return await run_on_sqlite(await session.connection(), publish)


def _sqlite_publisher(
    rows: list[tuple[str, int, str, str]], now: datetime, dialect: Dialect
) -> Callable[[sqlite3.Connection], dict[str, int]]:
    """The work of a publication on SQLite's connection (inside whatever transaction it has):
    how many deliveries it queued per event."""
    stored_time = _EVENTS.c.created_at.type.bind_processor(dialect)
    assert stored_time is not None
    at = stored_time(now)
    events = [(*row, at) for row in rows]
    subscriptions = orjson.dumps([row[:3] for row in rows]).decode()

    def publish(connection: sqlite3.Connection) -> dict[str, int]:
        connection.executemany(_INSERT_EVENT_ON_SQLITE, events)
        queued: dict[str, int] = {}
        for (event_id,) in connection.execute(_QUEUE_ON_SQLITE, (at, at, at, subscriptions)):
            queued[event_id] = queued.get(event_id, 0) + 1
        return queued

    return publish


async def publish_events_alone(
    database: Database, events: Sequence[NewEvent]
) -> list[PublishedEvent]:
    """publish_events for events that are the whole of a change (the events endpoint, test
    events): committed on their own, in one statement in autocommit on PostgreSQL and one
    hand-over to the driver's thread on SQLite. A transaction through SQLAlchemy's session
    cost about 1 ms of CPU per publication, most of the events endpoint's work."""
    now = clock.now()
    rows = _event_rows(events)
    if database.dialect == "postgresql":
        async with database.driver_connection() as connection:
            queued = dict(
                (event_id, count)
                for event_id, count, _ in await connection.fetch(
                    _PUBLISH_ALONE_ON_POSTGRES, orjson.dumps(rows).decode(), now
                )
            )
    else:
        queued = await _publish_alone_on_sqlite(database, rows, now)
    if queued:
        wakeup.notify()  # this process's workers (PostgreSQL's NOTIFY reaches the others)
    return _published(rows, queued, now)


async def _publish_alone_on_sqlite(
    database: Database, rows: list[tuple[str, int, str, str]], now: datetime
) -> dict[str, int]:
    publish = _sqlite_publisher(rows, now, database.engine.dialect)

    def publish_alone(connection: sqlite3.Connection) -> dict[str, int]:
        with immediate_transaction(connection):
            return publish(connection)

    return await database.run_on_sqlite(publish_alone)


async def publish_event(
    session: AsyncSession, *, customer_id: int, event_type: EventType, payload: Payload
) -> PublishedEvent:
    """Store one event and its deliveries in the caller's transaction (see publish_events)."""
    (event,) = await publish_events(session, [NewEvent(customer_id, event_type, payload)])
    return event


async def _queue_deliveries(
    session: AsyncSession, targets: Sequence[tuple[str, int, int]], *, now: datetime
) -> None:
    """Deliveries of (event id, customer, webhook), due now."""
    await insert_many(
        session,
        _DELIVERIES,
        [
            {
                "event_id": event_id,
                "webhook_id": webhook_id,
                "customer_id": customer_id,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
                "updated_at": now,
            }
            for event_id, customer_id, webhook_id in targets
        ],
    )


async def redeliver(
    session: AsyncSession, *, customer_id: int, webhook_id: int, event_id: str
) -> Event:
    """Queue one more delivery of one of the customer's events to one of its webhooks."""
    # Locked, so that a delete at the same moment waits for this delivery (and cancels it) or
    # makes this a 404, rather than the new delivery naming a webhook that is gone.
    webhook = await webhooks.get_webhook(
        session, customer_id=customer_id, webhook_id=webhook_id, for_update=True
    )
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
    await _queue_deliveries(session, [(event.id, customer_id, webhook.id)], now=clock.now())
    await _announce(session)
    return event


async def cancel_deliveries_to(
    session: AsyncSession, *, customer_id: int, webhook_id: int, target_url: str, reason: str
) -> int:
    """Take every pending delivery to one of the customer's webhooks off the queue, so its
    history ends in words rather than at a retry that never comes: one waiting in the queue is
    recorded as an attempt that was not sent (FAILED, with `reason`); one a worker holds under
    its lease is that worker's to record (it hears of the deletion, see worker.py), and is kept
    aside in case the worker never does (record_abandoned_cancellations). Returns how many were
    pending.

    The caller holds the webhook's row (FOR UPDATE), so no delivery to it can be added meanwhile
    (queueing one takes a share of that row). Set-based: a backlog of any size is a few
    statements, none of its rows read into Python (a merchant's dead receiver leaves hundreds of
    thousands queued)."""
    now = clock.now()
    d, e = _DELIVERIES.c, _EVENTS.c
    theirs = (d.webhook_id == webhook_id) & (d.customer_id == customer_id)
    if session.get_bind().dialect.name == "postgresql":
        # Locked in id order, as the worker's record locks them: the two never deadlock. A
        # worker's claim or record done meanwhile is waited for and its result read below.
        await session.execute(
            select(func.count()).select_from(
                select(d.id).where(theirs).order_by(d.id).with_for_update().subquery()
            )
        )
    waiting = or_(d.lease_until.is_(None), d.lease_until <= now)
    # Each pending delivery as the attempt it was to make, for a result or a cancelled row.
    pending = (
        select(
            d.id.label("delivery_id"),
            d.customer_id,
            d.webhook_id,
            d.event_id,
            e.event_type,
            literal(target_url, _RESULTS.c.target_url.type).label("target_url"),
            (d.attempts + 1).label("attempt"),
        )
        .select_from(_DELIVERIES.join(_EVENTS, e.id == d.event_id))
        .where(theirs)
    )
    as_attempts = [column.name for column in pending.selected_columns]
    r = _RESULTS.c
    await session.execute(
        insert(_RESULTS).from_select(
            [*as_attempts, "status", "error_message", "duration_ms", "attempted_at"],
            pending.add_columns(
                literal(ResultStatus.FAILED, r.status.type),
                literal(reason, r.error_message.type),
                literal(0, r.duration_ms.type),
                literal(now, r.attempted_at.type),
            ).where(waiting),
        )
    )
    # The results list's totals count them too (see result_counts): one hour, per event type.
    counts = result_counts.COUNTS.c
    await session.execute(
        insert(result_counts.COUNTS).from_select(
            [*result_counts.KEY, "result_count", "folded"],
            select(
                literal(customer_id, counts.customer_id.type),
                literal(result_counts.hour_of(now), counts.hour.type),
                literal(webhook_id, counts.webhook_id.type),
                e.event_type,
                literal(ResultStatus.FAILED, counts.status.type),
                func.count(),
                literal(False, counts.folded.type),
            )
            .select_from(_DELIVERIES.join(_EVENTS, e.id == d.event_id))
            .where(theirs, waiting)
            .group_by(e.event_type),
        )
    )
    await session.execute(
        insert(_CANCELLED).from_select(
            [*as_attempts, "claimed_at", "lease_until"],
            pending.add_columns(d.updated_at, d.lease_until).where(d.lease_until > now),
        )
    )
    removed = await session.execute(delete(_DELIVERIES).where(theirs))
    return int(getattr(removed, "rowcount", 0) or 0)


class _Cancelled(NamedTuple):
    delivery_id: int
    customer_id: int
    webhook_id: int
    event_id: str
    event_type: str
    target_url: str
    attempt: int


async def _record_cancelled(
    session: AsyncSession, deliveries: Sequence[_Cancelled], *, reason: str, now: datetime
) -> None:
    """The last record of cancelled deliveries (FAILED, saying why in `reason`)."""
    if not deliveries:
        return
    await insert_many(
        session,
        _RESULTS,
        [
            {
                "delivery_id": n.delivery_id,
                "customer_id": n.customer_id,
                "webhook_id": n.webhook_id,
                "event_id": n.event_id,
                "event_type": n.event_type,
                "target_url": n.target_url,
                "attempt": n.attempt,
                "status": ResultStatus.FAILED,
                "http_status": None,
                "response_body": None,
                "error_message": reason,
                "duration_ms": 0,
                "attempted_at": now,
                "next_attempt_at": None,
            }
            for n in deliveries
        ],
    )
    # The results list's totals count them too (see result_counts).
    await insert_many(
        session,
        result_counts.COUNTS,
        result_counts.count_rows(
            (n.customer_id, n.webhook_id, n.event_type, ResultStatus.FAILED, now)
            for n in deliveries
        ),
    )


# How long after its lease a cancelled delivery's holder still has to record it itself: an
# attempt starts well before the lease ends (worker.py) and is recorded within a second of its
# answer, so only a holder that stopped (killed, or paused past this) leaves it unrecorded.
ABANDONED_AFTER = timedelta(seconds=60)
# Its worker may have been sending it, or have sent it, when it stopped: nobody knows.
ABANDONED = (
    "outcome unknown: the worker holding this delivery stopped before recording its attempt "
    "(it may have reached the receiver or not), and the webhook was deleted meanwhile; this "
    "delivery is cancelled"
)


async def record_abandoned_cancellations(session: AsyncSession, *, now: datetime) -> int:
    """Give their last record (FAILED, ABANDONED) to the deliveries cancelled under a lease
    (cancel_deliveries_to) whose holder has not recorded them since, well after that lease ran
    out: the worker was killed holding them. Safe in several processes at once: each row is
    taken by one DELETE."""
    c = _CANCELLED.c
    due = select(c.delivery_id).where(c.lease_until <= now - ABANDONED_AFTER).limit(500)
    taken = list(
        await session.execute(
            delete(_CANCELLED).where(c.delivery_id.in_(due.scalar_subquery())).returning(*c)
        )
    )
    if not taken:
        return 0
    recorded = await _recorded_since_claimed(
        session,
        # Attempt numbers are the delivery's own; the time only bounds the search (with room
        # for the clocks of other machines).
        (
            _Held(
                row.customer_id, row.webhook_id, row.delivery_id, row.claimed_at - ABANDONED_AFTER
            )
            for row in taken
        ),
    )
    unrecorded = [row for row in taken if (row.delivery_id, row.attempt) not in recorded]
    await _record_cancelled(
        session,
        [
            _Cancelled(
                row.delivery_id,
                row.customer_id,
                row.webhook_id,
                row.event_id,
                row.event_type,
                row.target_url,
                row.attempt,
            )
            for row in unrecorded
        ],
        reason=ABANDONED,
        now=now,
    )
    return len(unrecorded)


# --- the worker's side ----------------------------------------------------------------------
#
# Claiming, recording and releasing are the queue's own operations, not part of any business
# change, so each runs on its own rather than in a caller's session: on PostgreSQL as one
# statement through asyncpg in autocommit (atomic by itself: one round trip, and no
# SQLAlchemy per-row work, which cost more than PostgreSQL did on this path), on SQLite in one
# short transaction under the database's write lock.


# NamedTuples rather than frozen dataclasses on the worker's path: one of each per delivery, and
# a frozen dataclass pays a setattr call per field to be made.
class ClaimedDelivery(NamedTuple):
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
# Due and not held: a claim sets `lease_until` and nothing else a due query or an index reads, so
# on PostgreSQL it is a HOT update (no new index entries; the table leaves room in its pages, see
# Delivery). Held deliveries stay at the head of the due indexes and each claim steps over them:
# a few hundred per worker, cheaper than the index entries a moved `next_attempt_at` wrote.
_NOT_LEASED = "(lease_until IS NULL OR lease_until <= {now})"
# Hosts left out of a claim, by the target URL of each delivery's webhook: its
# scheme://host[:port] (worker._target_key, lower case) followed by nothing, /, ? or #. Left
# out by host, not only by the webhooks of it a worker has seen: a hanging host behind more
# webhooks than a worker may hold would otherwise fill every claim.
_NOT_TO_HOSTS_ON_POSTGRES = """
(cardinality($7::text[]) = 0 OR NOT EXISTS (
    SELECT 1 FROM webhooks AS w, unnest($7::text[]) AS k(host)
     WHERE w.id = deliveries.webhook_id
       AND lower(left(w.target_url, length(k.host))) = k.host
       AND substr(w.target_url, length(k.host) + 1, 1) IN ('', '/', '?', '#')))"""
_CLAIM_ON_POSTGRES = f"""
WITH retry AS (
    SELECT id FROM deliveries
     WHERE {RETRY_QUEUE} AND next_attempt_at <= $1 AND {_NOT_LEASED.format(now="$1")}
       AND webhook_id <> ALL($5::bigint[]) AND {_NOT_TO_HOSTS_ON_POSTGRES}
     ORDER BY next_attempt_at LIMIT $2
       FOR UPDATE SKIP LOCKED
), fresh AS (
    SELECT id FROM deliveries
     WHERE {FIRST_ATTEMPT_QUEUE} AND next_attempt_at <= $1 AND {_NOT_LEASED.format(now="$1")}
       AND webhook_id <> ALL($5::bigint[]) AND {_NOT_TO_HOSTS_ON_POSTGRES}
     ORDER BY next_attempt_at LIMIT $3 - (SELECT count(*) FROM retry)
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE deliveries AS d
       SET lease_until = $4, claim_token = $6, updated_at = $1
     WHERE d.id IN (SELECT id FROM retry UNION ALL SELECT id FROM fresh)
    RETURNING d.id, d.event_id, d.webhook_id, d.customer_id, d.attempts
)
SELECT c.id, c.event_id, c.webhook_id, c.customer_id, c.attempts, e.event_type, e.payload,
       w.target_url, w.is_active, w.secret, w.previous_secrets, w.event_type
  FROM claimed AS c
  -- One index lookup per claimed row (LIMIT 1 keeps the planner from turning these back into
  -- plain joins): it cannot read the claim's size from `fresh`'s computed LIMIT, and with a
  -- large queue it took it for a tenth of the queue and hashed the whole events table instead
  -- (560 ms a claim with a million queued).
 CROSS JOIN LATERAL (SELECT event_type, payload FROM events WHERE id = c.event_id LIMIT 1) AS e
  LEFT JOIN LATERAL (
        SELECT target_url, is_active, secret, previous_secrets, event_type
          FROM webhooks WHERE id = c.webhook_id LIMIT 1
       ) AS w ON true
"""  # noqa: S608 - our own constants

# SQLite: the same work as a few statements in one transaction under the database's write lock,
# run on the driver's thread in one hand-over (db.run_on_sqlite; the claimed ids travel as one
# JSON array, rows come back as plain tuples): SQLAlchemy's compilation, its per-row processing
# and a hand-over per statement cost more than SQLite itself here, and on SQLite every
# microsecond of it is spent in the worker's own process.
_DUE_ON_SQLITE = f"""
SELECT id FROM deliveries
 WHERE {{queue}} AND next_attempt_at <= ? AND {_NOT_LEASED.format(now="?")}
   AND webhook_id NOT IN (SELECT value FROM json_each(?))
   AND (? = '[]' OR NOT EXISTS (
       SELECT 1 FROM webhooks AS w, json_each(?) AS k
        WHERE w.id = deliveries.webhook_id
          AND lower(substr(w.target_url, 1, length(k.value))) = k.value
          AND substr(w.target_url, length(k.value) + 1, 1) IN ('', '/', '?', '#')))
 ORDER BY next_attempt_at LIMIT ?
"""  # noqa: S608 - our own constants (hosts as on PostgreSQL: _NOT_TO_HOSTS_ON_POSTGRES)
_CLAIM_ON_SQLITE = """
UPDATE deliveries SET lease_until = ?, claim_token = ?, updated_at = ?
 WHERE id IN (SELECT value FROM json_each(?))
"""
# SQLite's RETURNING cannot reach other tables.
_CLAIMED_ON_SQLITE = """
SELECT d.id, d.event_id, d.webhook_id, d.customer_id, d.attempts, e.event_type, e.payload,
       w.target_url, w.is_active, w.secret, w.previous_secrets, w.event_type
  FROM deliveries AS d
  JOIN events AS e ON e.id = d.event_id
  LEFT JOIN webhooks AS w ON w.id = d.webhook_id
 WHERE d.id IN (SELECT value FROM json_each(?))
"""


async def _claim_on_sqlite(
    database: Database,
    *,
    retries: int,
    limit: int,
    now: datetime,
    until: datetime,
    token: str,
    exclude_webhooks: Sequence[int],
    exclude_hosts: Sequence[str],
) -> list[tuple[Any, ...]]:
    stored_time = _DELIVERIES.c.next_attempt_at.type.bind_processor(database.engine.dialect)
    assert stored_time is not None
    at, lease_end = stored_time(now), stored_time(until)
    excluded = orjson.dumps(list(exclude_webhooks)).decode()
    hosts = orjson.dumps(list(exclude_hosts)).decode()

    def claim(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
        with immediate_transaction(connection):  # nobody else claims meanwhile
            ids = [
                row[0]
                for row in connection.execute(
                    _DUE_ON_SQLITE.format(queue=RETRY_QUEUE),
                    (at, at, excluded, hosts, hosts, retries),
                )
            ]
            ids += [
                row[0]
                for row in connection.execute(
                    _DUE_ON_SQLITE.format(queue=FIRST_ATTEMPT_QUEUE),
                    (at, at, excluded, hosts, hosts, limit - len(ids)),
                )
            ]
            if not ids:
                return []
            claimed = orjson.dumps(ids).decode()
            connection.execute(_CLAIM_ON_SQLITE, (lease_end, token, at, claimed))
            return connection.execute(_CLAIMED_ON_SQLITE, (claimed,)).fetchall()

    rows = await database.run_on_sqlite(claim)
    # SQLite keeps booleans as integers.
    return [(*row[:8], None if row[8] is None else bool(row[8]), *row[9:]) for row in rows]


class Claim(NamedTuple):
    deliveries: list[ClaimedDelivery]
    # Whether more may be due than this claim took (it filled one of its queues' shares).
    more_due: bool


async def claim_due_deliveries(
    database: Database,
    *,
    limit: int,
    lease: timedelta,
    exclude_webhooks: Sequence[int] = (),
    exclude_hosts: Sequence[str] = (),
) -> Claim:
    """Take up to `limit` due deliveries for this worker until `lease` runs out.

    Retries may take up to a quarter of each batch and first attempts take the rest, so a
    backlog of retries to a failing receiver cannot hold back new events, nor new events starve
    retries. Deliveries of `exclude_webhooks`, and to `exclude_hosts` (scheme://host[:port] in
    lower case), are left for others.
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
                limit,
                now + lease,
                list(exclude_webhooks),
                token,
                list(exclude_hosts),
            )
    else:
        rows = await _claim_on_sqlite(
            database,
            retries=retries,
            limit=limit,
            now=now,
            until=now + lease,
            token=token,
            exclude_webhooks=exclude_webhooks,
            exclude_hosts=exclude_hosts,
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
        subscribed_to,
    ) in rows:
        target = None
        if url is not None:
            target = webhooks.DeliveryTarget(
                webhook_id, url, active, signing_secrets(secret, previous, now=now), subscribed_to
            )
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
    retried = sum(1 for c in claimed if c.attempt > 1)
    return Claim(claimed, more_due=retried >= retries or len(claimed) >= limit)


class Outcome(NamedTuple):
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
    # False when the attempt failed inside Tucano: it says nothing of the receiver's health
    # (automatic deactivation must not switch a merchant's webhook off for Tucano's fault).
    about_the_receiver: bool = True


# One row per attempt, in columns: (name, PostgreSQL type).
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
)
_RESULT_COLUMNS = ", ".join(name for name, _ in _OUTCOME_COLUMNS if name != "claim_token")
# The batch travels as one JSON array of rows: encoding it is a tenth of the cost of typed
# arrays on the worker's side (asyncpg inspects every element of an array), and the parsing
# falls to PostgreSQL (as jsonb: parsed once, where each `->>` of json parses the text again).
# The results are inserted; the deliveries move on only where this worker still holds the claim
# (a late outcome after the lease ran out is history, but no longer moves the delivery): a retry
# gets its next time, a finished delivery leaves the queue.
_OUTCOME_FIELDS = ", ".join(
    f"(r->>{i})::{kind} AS {name}" for i, (name, kind) in enumerate(_OUTCOME_COLUMNS)
)
NOT_RETRIED = "; not retried: the delivery was cancelled or finished meanwhile"
# A retry whose delivery has left the queue meanwhile (its webhook deleted) will not happen: its
# record says so rather than PENDING_RETRY. Read from `locked` (`l`), the batch's rows as they
# are once locked, not from the statement's snapshot, which predates a deletion (or another
# worker's claim) that the lock waited for. A row still there under another claim (this lease
# ran out and another worker took it) or none (given back) is a retry that does happen.
_VANISHED = "o.status = 'PENDING_RETRY' AND l.id IS NULL"
_RESULT_VALUES = ", ".join(
    {
        "status": f"CASE WHEN {_VANISHED} THEN 'FAILED' ELSE o.status END",
        "error_message": f"CASE WHEN {_VANISHED} THEN left(o.error_message || '{NOT_RETRIED}', 500)"
        " ELSE o.error_message END",
        "next_attempt_at": f"CASE WHEN {_VANISHED} THEN NULL ELSE o.next_attempt_at END",
    }.get(name, f"o.{name}")
    for name in _RESULT_COLUMNS.split(", ")
)
# The shape of each step is chosen for the planner, which takes a JSON batch for 100 rows of
# unknown content: written as plain joins, it hashed the whole queue (a sequential scan per
# record, of every pending delivery) to find a hundred of them, and ran the existence check of
# retries as a scan of the queue too; 18 ms for a batch of 128 against 2 ms now. LATERAL with
# LIMIT and `= ANY(ARRAY(...))` keep every step to index lookups of the batch's own ids.
# `locked`: the batch's deliveries, locked in id order, the order a webhook's deletion locks them
# in too (cancel_deliveries_to), so the two never deadlock; `held`: those this worker still holds.
_RECORD_ON_POSTGRES = f"""
WITH outcome AS MATERIALIZED (
    SELECT {_OUTCOME_FIELDS} FROM jsonb_array_elements($1::jsonb) AS r
), locked AS (
    SELECT d.id, d.claim_token, o.claim_token AS ours, o.next_attempt_at
      FROM (SELECT delivery_id, claim_token, next_attempt_at FROM outcome ORDER BY delivery_id) AS o
     CROSS JOIN LATERAL (
        SELECT d.id, d.claim_token FROM deliveries AS d WHERE d.id = o.delivery_id FOR UPDATE
     ) AS d
), held AS (
    SELECT id, next_attempt_at FROM locked WHERE claim_token = ours
), recorded AS (
    INSERT INTO delivery_results ({_RESULT_COLUMNS})
    SELECT {_RESULT_VALUES}
      FROM outcome AS o
      LEFT JOIN locked AS l ON l.id = o.delivery_id
    RETURNING customer_id, webhook_id, event_type, status, attempted_at
), counted AS ({result_counts.COUNT_RECORDED_ON_POSTGRES}
), finished AS (
    DELETE FROM deliveries
     WHERE id = ANY(ARRAY(SELECT id FROM held WHERE next_attempt_at IS NULL))
)
UPDATE deliveries AS d
   SET attempts = d.attempts + 1, next_attempt_at = h.next_attempt_at, claim_token = NULL,
       lease_until = NULL, updated_at = $2
  FROM held AS h
 WHERE d.id = h.id AND d.id = ANY(ARRAY(SELECT id FROM held WHERE next_attempt_at IS NOT NULL))
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
    )


_RESULT_NAMES = _RESULT_COLUMNS.split(", ")
_AT = {name: i for i, (name, _) in enumerate(_OUTCOME_COLUMNS)}  # an outcome row's positions
_RESULT_POSITIONS = [_AT[name] for name in _RESULT_NAMES]
_INSERT_RESULT_ON_SQLITE = (
    f"INSERT INTO delivery_results ({_RESULT_COLUMNS}) "  # noqa: S608 - our own column names
    f"VALUES ({', '.join('?' for _ in _RESULT_NAMES)})"
)
_COUNT_NAMES = (*result_counts.KEY, "result_count", "folded")
_INSERT_COUNT_ON_SQLITE = (
    f"INSERT INTO delivery_result_counts ({', '.join(_COUNT_NAMES)}) "  # noqa: S608 - ours
    f"VALUES ({', '.join('?' for _ in _COUNT_NAMES)})"
)
_QUEUED_ON_SQLITE = "SELECT id FROM deliveries WHERE id IN (SELECT value FROM json_each(?))"
_FINISH_ON_SQLITE = "DELETE FROM deliveries WHERE id = ? AND claim_token = ?"
_RETRY_ON_SQLITE = """
UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = ?, claim_token = NULL,
       lease_until = NULL, updated_at = ?
 WHERE id = ? AND claim_token = ?
"""


async def _record_on_sqlite(
    database: Database,
    rows: list[tuple[Any, ...]],
    now: datetime,
    *,
    health: list[webhooks.DeliveryHealth],
) -> None:
    """The same as _RECORD_ON_POSTGRES, and the webhooks' health, in one transaction run on the
    driver's thread (see _CLAIM_ON_SQLITE's comment)."""
    stored_time = _RESULTS.c.attempted_at.type.bind_processor(database.engine.dialect)
    assert stored_time is not None
    delivery_id, token, status, error, attempted, next_at = (
        _AT["delivery_id"],
        _AT["claim_token"],
        _AT["status"],
        _AT["error_message"],
        _AT["attempted_at"],
        _AT["next_attempt_at"],
    )
    customer, webhook, event_type = _AT["customer_id"], _AT["webhook_id"], _AT["event_type"]
    attempted_at = [row[attempted] for row in rows]
    ids = orjson.dumps([row[delivery_id] for row in rows]).decode()
    results = []
    finished = []
    retries = []
    stored_now = stored_time(now)
    for row in rows:
        result = list(row)
        result[attempted] = stored_time(result[attempted])
        if result[next_at] is None:
            finished.append((row[delivery_id], row[token]))
        else:
            result[next_at] = stored_time(result[next_at])
            retries.append((result[next_at], stored_now, row[delivery_id], row[token]))
        results.append(result)

    def record(connection: sqlite3.Connection) -> None:
        with immediate_transaction(connection):
            queued = {row[0] for row in connection.execute(_QUEUED_ON_SQLITE, (ids,))}
            for result in results:
                if (
                    result[status] == ResultStatus.PENDING_RETRY
                    and result[delivery_id] not in queued
                ):
                    # A retry whose delivery left the queue meanwhile (see _RECORD_ON_POSTGRES).
                    result[status] = ResultStatus.FAILED
                    result[error] = ((result[error] or "") + NOT_RETRIED)[:500]
                    result[next_at] = None
            connection.executemany(
                _INSERT_RESULT_ON_SQLITE,
                [tuple(result[i] for i in _RESULT_POSITIONS) for result in results],
            )
            connection.executemany(
                _INSERT_COUNT_ON_SQLITE,
                [
                    tuple(count[name] for name in _COUNT_NAMES)
                    for count in result_counts.count_rows(
                        (row[customer], row[webhook], row[event_type], result[status], moment)
                        for row, result, moment in zip(rows, results, attempted_at, strict=True)
                    )
                ],
            )
            if finished:
                connection.executemany(_FINISH_ON_SQLITE, finished)
            if retries:
                connection.executemany(_RETRY_ON_SQLITE, retries)
            webhooks.record_delivery_health_on_sqlite(connection, health, stored_time)

    await database.run_on_sqlite(record)


async def record_outcomes(database: Database, outcomes: Sequence[Outcome]) -> None:
    """Write a batch of attempts: their result rows, their deliveries' new state, and the
    webhooks' delivery health."""
    if not outcomes:
        return
    now = clock.now()
    rows = [_outcome_row(o) for o in outcomes]
    health = _delivery_health(outcomes)
    if database.dialect != "postgresql":
        await _record_on_sqlite(database, rows, now, health=health)
        return
    async with database.driver_connection() as connection:
        await connection.execute(_RECORD_ON_POSTGRES, orjson.dumps(rows).decode(), now)
    try:
        await webhooks.record_delivery_health_on_postgres(database, health)
    except Exception:
        # The attempts are recorded; raising now would have the caller record them twice.
        log.exception("delivery_health_update_failed", webhooks=len(health))


def _delivery_health(outcomes: Sequence[Outcome]) -> list[webhooks.DeliveryHealth]:
    """Each webhook's latest success in the batch and its failures after that, by the time
    each attempt started. A delivery cancelled unsent (FAILED) says nothing of the receiver."""
    succeeded: dict[int, datetime] = {}
    failed: dict[int, list[datetime]] = {}
    for o in outcomes:
        webhook_id = o.claimed.webhook_id
        if not o.about_the_receiver:
            continue
        if o.status == ResultStatus.SUCCESS:
            if webhook_id not in succeeded or o.attempted_at > succeeded[webhook_id]:
                succeeded[webhook_id] = o.attempted_at
        elif o.status in (ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED):
            failed.setdefault(webhook_id, []).append(o.attempted_at)
    return [
        webhooks.DeliveryHealth(
            webhook_id,
            succeeded.get(webhook_id),
            tuple(
                at
                for at in failed.get(webhook_id, ())
                if webhook_id not in succeeded or at > succeeded[webhook_id]
            ),
        )
        for webhook_id in succeeded.keys() | failed.keys()
    ]


async def release_claims(
    database: Database, claims: Sequence[ClaimedDelivery], *, due_at: datetime, lease: timedelta
) -> list[ClaimedDelivery]:
    """Give claimed deliveries back (taken for `lease`), unattempted, due again at `due_at`.
    Returns those whose webhook was deleted meanwhile while they were held: the deletion took
    them off the queue and left them to their holder to record (cancel_deliveries_to)."""
    if not claims:
        return []
    table = _DELIVERIES
    async with database.session() as session:
        await session.execute(
            update(table)
            .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
            .values(next_attempt_at=due_at, claim_token=None, lease_until=None),
            # In id order, the order a webhook's deletion locks them in: in any other, the two
            # could deadlock, and PostgreSQL would undo one of them.
            [
                {"b_id": c.delivery_id, "b_token": c.claim_token}
                for c in sorted(claims, key=lambda c: c.delivery_id)
            ],
        )
        # Run after the update, which waited for a deletion holding these rows: a row gone
        # with its webhook was cancelled. (Gone with the webhook still there, another worker
        # claimed it once this lease ran out, and finished it.)
        queued: set[int] = set()
        for part in in_parts([c.delivery_id for c in claims]):
            queued.update(await session.scalars(select(table.c.id).where(table.c.id.in_(part))))
        gone = [c for c in claims if c.delivery_id not in queued]
        existing = (
            await webhooks.existing_webhook_ids(session, (c.webhook_id for c in gone))
            if gone
            else set()
        )
        cancelled = [c for c in gone if c.webhook_id not in existing]
        # Unless it was already recorded since the claim: by the deletion (whose time the lease
        # had run out by), or by another worker that took it after this lease.
        recorded = await _recorded_since_claimed(
            session,
            (
                _Held(c.customer_id, c.webhook_id, c.delivery_id, c.lease_until - lease)
                for c in cancelled
            ),
        )
        await session.commit()
    return [c for c in cancelled if (c.delivery_id, c.attempt) not in recorded]


class _Held(NamedTuple):
    customer_id: int
    webhook_id: int
    delivery_id: int
    claimed_at: datetime


async def _recorded_since_claimed(
    session: AsyncSession, held: Iterable[_Held]
) -> set[tuple[int, int]]:
    """(delivery, attempt) of results these deliveries have since they were claimed: one index
    range per webhook (rare: a deletion racing a give-back, or a worker killed holding them)."""
    by_webhook: dict[tuple[int, int], list[_Held]] = {}
    for h in held:
        by_webhook.setdefault((h.customer_id, h.webhook_id), []).append(h)
    found: set[tuple[int, int]] = set()
    r = _RESULTS.c
    for (customer_id, webhook_id), theirs in by_webhook.items():
        since = min(h.claimed_at for h in theirs)
        for part in in_parts([h.delivery_id for h in theirs]):
            found.update(
                (row.delivery_id, row.attempt)
                for row in await session.execute(
                    select(r.delivery_id, r.attempt).where(
                        r.customer_id == customer_id,
                        r.webhook_id == webhook_id,
                        r.attempted_at >= since,
                        r.delivery_id.in_(part),
                    )
                )
            )
    return found


# --- history --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultFilters:
    event_type: EventType | None = None
    webhook_id: int | None = None
    status: str | None = None
    start: datetime | None = None
    end: datetime | None = None


# Offsets from which the results list counts before it reads a page (see list_results).
DEEP_OFFSET = 10_000


async def list_results(
    session: AsyncSession, *, customer_id: int, filters: ResultFilters, page: PageRequest
) -> tuple[Sequence[DeliveryResult], int]:
    matched = []  # the filters but the date range, on results and on the hour counts alike
    counts = result_counts.COUNTS.c
    on_counts = []
    if filters.event_type is not None:
        matched.append(DeliveryResult.event_type == filters.event_type.value)
        on_counts.append(counts.event_type == filters.event_type.value)
    if filters.webhook_id is not None:
        matched.append(DeliveryResult.webhook_id == filters.webhook_id)
        on_counts.append(counts.webhook_id == filters.webhook_id)
    if filters.status is not None:
        matched.append(DeliveryResult.status == filters.status)
        on_counts.append(counts.status == filters.status)
    total = result_counts.total_matching(
        customer_id, matched, on_counts, start=filters.start, end=filters.end
    ).label("total")
    condition = [DeliveryResult.customer_id == customer_id, *matched]
    if filters.start is not None:
        condition.append(DeliveryResult.attempted_at >= filters.start)
    if filters.end is not None:
        condition.append(DeliveryResult.attempted_at <= filters.end)
    newest_first = (DeliveryResult.attempted_at.desc(), DeliveryResult.id.desc())
    if page.offset >= DEEP_OFFSET:
        # Far down, the total first: a page past the end is then answered without stepping
        # over every matching result to find it empty.
        counted = int(await session.scalar(select(total)) or 0)
        if page.offset >= counted:
            return [], counted
    # The page and the total in one statement: one round trip, and on PostgreSQL one snapshot,
    # so a result recorded meanwhile cannot make them disagree. (A sum of bigints is a numeric
    # there: a Decimal here.)
    rows = (
        await session.execute(
            select(DeliveryResult, total)
            .where(*condition)
            .order_by(*newest_first)
            .offset(page.offset)
            .limit(page.size)
        )
    ).all()
    if rows:
        return [row[0] for row in rows], int(rows[0][1])
    # Past the last page (or nothing matches): the total alone.
    return [], int(await session.scalar(select(total)) or 0)


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
    gone = (
        await session.execute(
            delete(DeliveryResult)
            .where(DeliveryResult.id.in_(old_results))
            .returning(
                DeliveryResult.customer_id,
                DeliveryResult.webhook_id,
                DeliveryResult.event_type,
                DeliveryResult.status,
                DeliveryResult.attempted_at,
            )
        )
    ).all()
    if gone:
        # The hour counts lose them too (see result_counts).
        await session.execute(
            insert(result_counts.COUNTS),
            result_counts.count_rows(
                (
                    (row.customer_id, row.webhook_id, row.event_type, row.status, row.attempted_at)
                    for row in gone
                ),
                sign=-1,
            ),
        )
    removed = len(gone)
    unfinished = select(Delivery.id).where(Delivery.event_id == Event.id)
    old_events = (
        select(Event.id)
        .where(Event.created_at < older_than, ~unfinished.exists())
        .limit(batch_size)
        .scalar_subquery()
    )
    removed += (await session.execute(delete(Event).where(Event.id.in_(old_events)))).rowcount or 0  # type: ignore[attr-defined]
    return int(removed)
