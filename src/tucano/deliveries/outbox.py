"""The outbox: events and their deliveries, written with the caller's session.

`publish_events` (and `publish_event`) is the way in for an event caused by a business change:
it writes the event and one delivery per matching active webhook with the caller's session, so
they commit (or not) together with that change. An event that is the whole of a change (the
events endpoint, test events) goes through `publish_events_alone`, the same writes committed on
their own. `redeliver` queues one more delivery of a stored event.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, cast

import orjson
from sqlalchemy import Table, select, text
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode, NotFound
from tucano.db.bulk import insert_many
from tucano.db.database import Database, call_after_commit
from tucano.db.sqlite_handover import immediate_transaction, run_on_sqlite
from tucano.deliveries.models import Delivery, Event
from tucano.deliveries.worker.wakeup import NOTIFY_CHANNEL, wakeup
from tucano.events.payloads import Payload, published
from tucano.events.types import EventType
from tucano.webhooks import service as webhooks

_EVENTS = cast(Table, Event.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)


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
# hand-over (db.sqlite_handover.run_on_sqlite), inside the caller's transaction.
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
    hand-over to the driver's thread on SQLite, rather than a transaction through SQLAlchemy's
    session (see docs/adr/delivery-queue.md)."""
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
