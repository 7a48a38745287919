"""Every statement on events and the queue's own rows (deliveries, cancelled deliveries) made
by the feature's services; the queue's claims and records are its back ends' (queue/)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Select,
    String,
    Table,
    Text,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    union_all,
)
from sqlalchemy.sql.expression import ColumnElement

from tucano.core import json_codec
from tucano.db.database import Database
from tucano.db.notifications import notify
from tucano.db.postgres import Compiled, driver_connection
from tucano.db.repository import Repository, in_parts
from tucano.deliveries.models import (
    FIRST_ATTEMPT_QUEUE,
    RETRY_QUEUE,
    CancelledDelivery,
    Delivery,
    DeliveryResult,
    Event,
    ResultStatus,
)
from tucano.deliveries.result_counts import KEY, hour_of
from tucano.deliveries.result_repository import COUNTS, recoverable_events
from tucano.webhooks.models import Webhook

EVENTS = cast(Table, Event.__table__)
DELIVERIES = cast(Table, Delivery.__table__)
RESULTS = cast(Table, DeliveryResult.__table__)
CANCELLED = cast(Table, CancelledDelivery.__table__)
WEBHOOKS = cast(Table, Webhook.__table__)

# The queues as their partial indexes' conditions spell them, which a planner needs to use them.
FIRST_ATTEMPTS = text(FIRST_ATTEMPT_QUEUE)
RETRIES = text(RETRY_QUEUE)


class EventRow(NamedTuple):
    id: str
    customer_id: int
    event_type: str
    payload: str  # JSON


class DeliveryRepository(Repository[Delivery]):
    model = Delivery

    async def add_events(self, events: Sequence[EventRow], *, now: datetime) -> dict[str, int]:
        """Insert events created `now`, and a delivery of each, due now, to every active
        webhook of its customer for its type; how many deliveries each got (events with none
        left out). The webhooks are locked against deletion until the transaction ends (FOR
        KEY SHARE, on PostgreSQL), so one deleted meanwhile is either skipped or waits for
        this transaction."""
        if not events:
            return {}
        if self.accelerated:
            rows = await self.session.execute(_PUBLISH, _publish_values(events, now))
            return {event_id: deliveries for event_id, deliveries in rows}
        await self.session.execute(
            insert(EVENTS), [{**event._asdict(), "created_at": now} for event in events]
        )
        queued: Counter[str] = Counter()
        for part in in_parts([event.id for event in events]):
            queued.update(
                await self.session.scalars(
                    insert(DELIVERIES)
                    .from_select(
                        _QUEUED_COLUMNS,
                        _subscribers(EVENTS, literal(now, EVENTS.c.created_at.type)).where(
                            EVENTS.c.id.in_(part)
                        ),
                    )
                    .returning(DELIVERIES.c.event_id)
                )
            )
        return dict(queued)

    @classmethod
    async def add_events_and_commit(
        cls, database: Database, events: Sequence[EventRow], *, now: datetime, channel: str
    ) -> dict[str, int]:
        """add_events, committed on its own, with a notification on `channel` when anything
        was queued. On PostgreSQL, one statement in autocommit on a driver connection: the
        events endpoint's every request."""
        if cls.accelerated_on(database) and events:
            async with driver_connection(database) as connection:
                rows = await _PUBLISH_AND_NOTIFY.all(
                    connection, {**_publish_values(events, now), "channel": channel}
                )
            return {row.event_id: row.deliveries for row in rows}
        async with database.session() as session:
            queued = await cls(session).add_events(events, now=now)
            if queued:
                await notify(session, channel)
            await session.commit()
        return queued

    async def get_event(self, *, customer_id: int, event_id: str) -> Event | None:
        return await self.get_one_or_none(
            select(Event).where(Event.id == event_id, Event.customer_id == customer_id)
        )

    async def queue(
        self, *, event_id: str, customer_id: int, webhook_id: int, now: datetime
    ) -> None:
        """One more delivery of an event to a webhook, due now."""
        await self.session.execute(
            insert(DELIVERIES).values(
                event_id=event_id,
                webhook_id=webhook_id,
                customer_id=customer_id,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
                updated_at=now,
            )
        )

    async def queue_recoverable(
        self,
        *,
        customer_id: int,
        webhook_id: int,
        event_type: str,
        since: datetime,
        until: datetime,
        now: datetime,
    ) -> int:
        """One more delivery, due now, of each event result_repository.recoverable_events
        finds; how many. One INSERT ... SELECT: however many there are, none is read into
        Python. The caller holds the webhook's row, so two recoveries of it run one after the
        other and the second finds the first's deliveries pending."""
        found = recoverable_events(
            customer_id=customer_id,
            webhook_id=webhook_id,
            event_type=event_type,
            since=since,
            until=until,
        ).subquery("found")
        at = literal(now, DELIVERIES.c.created_at.type)
        queued = await self.session.execute(
            insert(DELIVERIES).from_select(
                _QUEUED_COLUMNS,
                select(
                    found.c.event_id,
                    literal(webhook_id, DELIVERIES.c.webhook_id.type),
                    literal(customer_id, DELIVERIES.c.customer_id.type),
                    literal(0, DELIVERIES.c.attempts.type),
                    at,
                    at,
                    at,
                ),
            )
        )
        return int(getattr(queued, "rowcount", 0) or 0)

    async def cancel_deliveries_to(
        self,
        *,
        customer_id: int,
        webhook_id: int,
        target_url: str,
        reason: str,
        now: datetime,
    ) -> int:
        """Take every pending delivery to one of the customer's webhooks off the queue: one
        waiting is recorded as an attempt not sent (FAILED, `reason`, and its hour count); one
        a worker holds under its lease is kept aside in cancelled_deliveries, its holder's to
        record. Returns how many were pending. Set-based: a backlog of any size is a few
        statements, none of its rows read into Python (a merchant's dead receiver leaves
        hundreds of thousands queued). The caller holds the webhook's row, so no delivery to
        it can be added meanwhile (queueing one takes a share of that row)."""
        d, e = DELIVERIES.c, EVENTS.c
        theirs = (d.webhook_id == webhook_id) & (d.customer_id == customer_id)
        if self.on_postgresql:
            # Locked in id order, as a worker's record locks them: the two never deadlock. A
            # worker's claim or record done meanwhile is waited for and its result read below.
            await self.session.execute(
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
                literal(target_url, RESULTS.c.target_url.type).label("target_url"),
                (d.attempts + 1).label("attempt"),
            )
            .select_from(DELIVERIES.join(EVENTS, e.id == d.event_id))
            .where(theirs)
        )
        as_attempts = [column.name for column in pending.selected_columns]
        r = RESULTS.c
        await self.session.execute(
            insert(RESULTS).from_select(
                [*as_attempts, "status", "error_message", "duration_ms", "attempted_at"],
                pending.add_columns(
                    literal(ResultStatus.FAILED, r.status.type),
                    literal(reason, r.error_message.type),
                    literal(0, r.duration_ms.type),
                    literal(now, r.attempted_at.type),
                ).where(waiting),
            )
        )
        counts = COUNTS.c
        await self.session.execute(
            insert(COUNTS).from_select(
                [*KEY, "result_count", "folded"],
                select(
                    literal(customer_id, counts.customer_id.type),
                    literal(hour_of(now), counts.hour.type),
                    literal(webhook_id, counts.webhook_id.type),
                    e.event_type,
                    literal(ResultStatus.FAILED, counts.status.type),
                    func.count(),
                    literal(False, counts.folded.type),
                )
                .select_from(DELIVERIES.join(EVENTS, e.id == d.event_id))
                .where(theirs, waiting)
                .group_by(e.event_type),
            )
        )
        await self.session.execute(
            insert(CANCELLED).from_select(
                [*as_attempts, "claimed_at", "lease_until"],
                pending.add_columns(d.updated_at, d.lease_until).where(d.lease_until > now),
            )
        )
        removed = await self.session.execute(delete(DELIVERIES).where(theirs))
        return int(getattr(removed, "rowcount", 0) or 0)

    async def take_abandoned(self, *, leased_until: datetime, limit: int = 500) -> list[Any]:
        """Take (delete, returning them) up to `limit` cancelled deliveries whose lease ran out
        at or before `leased_until`; each is taken by one process only."""
        c = CANCELLED.c
        due = select(c.delivery_id).where(c.lease_until <= leased_until).limit(limit)
        return list(
            await self.session.execute(
                delete(CANCELLED).where(c.delivery_id.in_(due.scalar_subquery())).returning(*c)
            )
        )

    async def backlog(self, *, now: datetime) -> tuple[int, datetime | None]:
        """How many deliveries are due (held or being sent included) and the oldest due time,
        each queue read through its partial index."""
        d = DELIVERIES.c
        due = union_all(
            select(d.next_attempt_at).where(FIRST_ATTEMPTS, d.next_attempt_at <= now),
            select(d.next_attempt_at).where(RETRIES, d.next_attempt_at <= now),
        ).subquery()
        row = (
            await self.session.execute(select(func.count(), func.min(due.c.next_attempt_at)))
        ).one()
        return int(row[0]), row[1]


_QUEUED_COLUMNS = [
    *("event_id", "webhook_id", "customer_id", "attempts"),
    *("next_attempt_at", "created_at", "updated_at"),
]


def _subscribers(events: Any, at: ColumnElement[datetime]) -> Select[Any]:
    """(the columns of _QUEUED_COLUMNS) for a delivery, due `at`, of each of `events` (rows
    with id, customer_id and event_type) to every active webhook of its customer for its
    type."""
    e, w = events.c, WEBHOOKS.c
    return (
        select(e.id, w.id, e.customer_id, literal(0), at, at, at)
        .select_from(
            events.join(
                WEBHOOKS,
                and_(
                    w.customer_id == e.customer_id,
                    w.event_type == e.event_type,
                    w.is_active.is_(True),
                ),
            )
        )
        .order_by(w.id)
        .with_for_update(read=True, key_share=True, of=WEBHOOKS)
    )


def _publish_statement(*, notifying: bool) -> Select[Any]:
    """PostgreSQL: add_events in one statement. The events travel as one JSON array;
    with `notifying`, a notification on :channel is sent once when anything was queued (an
    uncorrelated subquery in the select list runs once, for the first row)."""
    new = (
        func.json_to_recordset(bindparam("events", type_=Text).cast(JSON))
        .table_valued(
            column("id", String),
            column("customer_id", BigInteger),
            column("event_type", String),
            column("payload", Text),
        )
        .render_derived(name="new", with_types=True)
    )
    now = bindparam("now", type_=EVENTS.c.created_at.type)
    new_events = (
        insert(EVENTS)
        .from_select(
            ["id", "customer_id", "event_type", "payload", "created_at"],
            select(new.c.id, new.c.customer_id, new.c.event_type, new.c.payload, now),
        )
        .returning(EVENTS.c.id, EVENTS.c.customer_id, EVENTS.c.event_type)
        .cte("new_events")
    )
    queued = (
        insert(DELIVERIES)
        .from_select(_QUEUED_COLUMNS, _subscribers(new_events, now))
        .returning(DELIVERIES.c.event_id)
        .cte("queued")
    )
    counts = select(queued.c.event_id, func.count().label("deliveries")).group_by(queued.c.event_id)
    if notifying:
        counts = counts.add_columns(
            select(func.pg_notify(bindparam("channel", type_=String), "")).scalar_subquery()
        )
    return counts


def _publish_values(events: Sequence[EventRow], now: datetime) -> dict[str, Any]:
    return {"events": json_codec.dumps([event._asdict() for event in events]).decode(), "now": now}


_PUBLISH = _publish_statement(notifying=False)
_PUBLISH_AND_NOTIFY = Compiled(_publish_statement(notifying=True))
