"""The delivery feature's services: the outbox (events and their deliveries, written in the
caller's transaction), redelivery and recovery, deleting a webhook with its pending
deliveries, and the results history with its upkeep.

`publish_events` is the way in for an event caused by a business change: the events and one
delivery per matching active webhook go in with the caller's session, so they commit (or not)
together with that change, and workers hear of them only after that commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.config import Settings
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, BadRequest, ErrorCode, NotFound
from tucano.core.paging import PageRequest
from tucano.db.database import Database, call_after_commit
from tucano.db.notifications import notify
from tucano.deliveries.activity import NO_ACTIVITY, WebhookActivity
from tucano.deliveries.models import DeliveryResult, Event, ResultStatus
from tucano.deliveries.queue.nats import StreamLag, read_stream_lag, servers_of
from tucano.deliveries.repository import DeliveryRepository, EventRow
from tucano.deliveries.result_counts import hour_of
from tucano.deliveries.result_repository import HeldDelivery, ResultFilters, ResultRepository
from tucano.deliveries.worker.wakeup import NOTIFY_CHANNEL, wakeup
from tucano.events.payloads import Payload, published
from tucano.events.samples import Variant, sample_payload
from tucano.events.types import EventType
from tucano.webhooks import service as webhooks
from tucano.webhooks.models import Webhook

DELETED = "not sent: the webhook was deleted; this delivery is cancelled"
# How long after its lease a cancelled delivery's holder still has to record it itself: an
# attempt starts well before the lease ends (worker.loop, `_send_forever`) and is recorded
# within a second of its answer, so only a holder that stopped leaves it unrecorded.
ABANDONED_AFTER = timedelta(seconds=60)
# Its worker may have been sending it, or have sent it, when it stopped: nobody knows.
ABANDONED = (
    "outcome unknown: the worker holding this delivery stopped before recording its attempt "
    "(it may have reached the receiver or not), and the webhook was deleted meanwhile; this "
    "delivery is cancelled"
)


# The widest range one recovery takes, as Svix's does, and the slack Svix adds to it: a client
# asking for "now minus 14 days" is not refused because its clock and Tucano's differ a little.
RECOVERY_RANGE = timedelta(days=14)
RECOVERY_RANGE_SLACK = timedelta(minutes=5)


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


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


async def publish_events(session: AsyncSession, events: Sequence[NewEvent]) -> list[PublishedEvent]:
    """Store events, and a delivery of each to every active webhook of its customer for its
    type, in the caller's transaction (the outbox)."""
    now = clock.now()
    rows = _event_rows(events)
    queued = await DeliveryRepository(session).add_events(rows, now=now)
    if queued:
        await _announce_deliveries(session)
    return _published(events, rows, queued, now)


def _event_rows(events: Sequence[NewEvent]) -> list[EventRow]:
    return [
        EventRow(
            new_event_id(),
            e.customer_id,
            e.event_type.value,
            json_codec.dumps(published(e.payload)).decode(),
        )
        for e in events
    ]


def _published(
    events: Sequence[NewEvent], rows: list[EventRow], queued: dict[str, int], now: datetime
) -> list[PublishedEvent]:
    return [
        PublishedEvent(row.id, e.customer_id, e.event_type, now, queued.get(row.id, 0))
        for e, row in zip(events, rows, strict=True)
    ]


async def publish_event(
    session: AsyncSession, *, customer_id: int, event_type: EventType, payload: Payload
) -> PublishedEvent:
    """Store one event and its deliveries in the caller's transaction (see publish_events)."""
    (event,) = await publish_events(session, [NewEvent(customer_id, event_type, payload)])
    return event


async def publish_events_alone(
    database: Database, events: Sequence[NewEvent]
) -> list[PublishedEvent]:
    """publish_events for events that are the whole of a change (test events, provider events
    that pay nothing): committed on their own."""
    now = clock.now()
    rows = _event_rows(events)
    queued = await DeliveryRepository.add_events_and_commit(
        database, rows, now=now, channel=NOTIFY_CHANNEL
    )
    if queued:
        wakeup.notify()  # this process's workers; the notification reaches the others
    return _published(events, rows, queued, now)


async def send_test_event(
    database: Database,
    *,
    customer_id: int,
    partner_id: int | None,
    event_type: EventType,
    variant: Variant | None,
    sandbox: bool,
) -> PublishedEvent:
    """A sample event of `event_type` (its `variant`), delivered to the customer's active
    webhooks of that type as any event is; only in the sandbox (403 elsewhere)."""
    if not sandbox:
        raise AppError(ErrorCode.SANDBOX_ONLY, errors=["test events exist only in the sandbox"])
    payload = sample_payload(event_type, variant=variant, partner_id=partner_id)
    (event,) = await publish_events_alone(database, [NewEvent(customer_id, event_type, payload)])
    return event


async def _announce_deliveries(session: AsyncSession) -> None:
    """Wake workers once this transaction commits: in this process directly, in others through
    the database's notifications (delivered only on commit)."""
    call_after_commit(session, "deliveries.wakeup", wakeup.notify)
    await notify(session, NOTIFY_CHANNEL)


async def redeliver(
    session: AsyncSession, *, customer_id: int, webhook_id: int, event_id: str
) -> Event:
    """Queue one more delivery of one of the customer's events to one of its webhooks."""
    # Locked, so that a delete at the same moment waits for this delivery (and cancels it) or
    # makes this a 404, rather than the new delivery naming a webhook that is gone.
    webhook = await webhooks.get_webhook(
        session, customer_id=customer_id, webhook_id=webhook_id, for_update=True
    )
    repository = DeliveryRepository(session)
    event = await repository.get_event(customer_id=customer_id, event_id=event_id)
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
    _require_active(webhook)
    await repository.queue(
        event_id=event.id, customer_id=customer_id, webhook_id=webhook.id, now=clock.now()
    )
    await _announce_deliveries(session)
    return event


def _require_active(webhook: Webhook) -> None:
    if not webhook.is_active:
        raise AppError(
            ErrorCode.WEBHOOK_INACTIVE,
            errors=[f"webhook {webhook.id} is inactive; activate it (PUT isActive) first"],
        )


def _check_recovery_range(since: datetime, until: datetime) -> None:
    if until - since > RECOVERY_RANGE + RECOVERY_RANGE_SLACK:
        raise BadRequest(
            f"since must be at most {RECOVERY_RANGE.days} days before until (now when until is "
            "left out); recover a longer outage in several ranges"
        )


async def count_recoverable(
    session: AsyncSession, *, customer_id: int, webhook_id: int, since: datetime, until: datetime
) -> int:
    """How many of the customer's events `recover` would deliver to one of its webhooks again
    now (see recover); an inactive webhook's are counted too (activating it comes first)."""
    _check_recovery_range(since, until)
    webhook = await webhooks.get_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
    return await ResultRepository(session).count_recoverable(
        customer_id=customer_id,
        webhook_id=webhook.id,
        event_type=webhook.event_type,
        since=since,
        until=until,
    )


async def recover(
    session: AsyncSession,
    *,
    customer_id: int,
    webhook_id: int,
    since: datetime,
    until: datetime,
    dry_run: bool = False,
) -> int:
    """Queue one more delivery to one of the customer's webhooks of each of its events (of the
    webhook's type) whose newest attempt there failed for good (FAILED or EXHAUSTED) between
    `since` and `until`, inclusive, and that has no delivery to it pending; returns how many.
    A later success, or a retry still to come, leaves an event out, and so does a recovery
    already queued: recovering a range twice queues nothing the second time. A `dry_run`
    makes every check and queues nothing: how many it would queue."""
    _check_recovery_range(since, until)
    # Locked, as redeliver locks it: a deletion at the same moment waits for these deliveries
    # (and cancels them), and two recoveries of the webhook run one after the other.
    webhook = await webhooks.get_webhook(
        session, customer_id=customer_id, webhook_id=webhook_id, for_update=not dry_run
    )
    _require_active(webhook)
    if dry_run:
        return await ResultRepository(session).count_recoverable(
            customer_id=customer_id,
            webhook_id=webhook.id,
            event_type=webhook.event_type,
            since=since,
            until=until,
        )
    queued = await DeliveryRepository(session).queue_recoverable(
        customer_id=customer_id,
        webhook_id=webhook.id,
        event_type=webhook.event_type,
        since=since,
        until=until,
        now=clock.now(),
    )
    if queued:
        await _announce_deliveries(session)
    return queued


async def delete_webhook(session: AsyncSession, *, customer_id: int, webhook_id: int) -> int:
    """Delete one of the customer's webhooks and take its pending deliveries off the queue, so
    its history ends in words rather than at a retry that never comes: one waiting is recorded
    as not sent; one a worker holds is that worker's to record (it hears of the deletion), and
    is kept aside in case it never does (record_abandoned_cancellations). Returns how many
    deliveries were pending."""
    # The webhook's row first, then its deliveries: the order every writer locks them in.
    webhook = await webhooks.get_webhook(
        session, customer_id=customer_id, webhook_id=webhook_id, for_update=True
    )
    pending = await DeliveryRepository(session).cancel_deliveries_to(
        customer_id=customer_id,
        webhook_id=webhook_id,
        target_url=webhook.target_url,
        reason=DELETED,
        now=clock.now(),
    )
    await webhooks.delete_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
    return pending


async def record_abandoned_cancellations(session: AsyncSession, *, now: datetime) -> int:
    """Give their last record (FAILED, ABANDONED) to the deliveries cancelled under a lease
    whose holder has not recorded them since, well after that lease ran out: the worker was
    killed holding them. Safe in several processes at once."""
    taken = await DeliveryRepository(session).take_abandoned(leased_until=now - ABANDONED_AFTER)
    if not taken:
        return 0
    results = ResultRepository(session)
    recorded = await results.recorded_since_claimed(
        # Attempt numbers are the delivery's own; the time only bounds the search (with room
        # for the clocks of other machines).
        HeldDelivery(
            row.customer_id, row.webhook_id, row.delivery_id, row.claimed_at - ABANDONED_AFTER
        )
        for row in taken
    )
    unrecorded = [row for row in taken if (row.delivery_id, row.attempt) not in recorded]
    await results.add(
        [
            {
                "delivery_id": row.delivery_id,
                "customer_id": row.customer_id,
                "webhook_id": row.webhook_id,
                "event_id": row.event_id,
                "event_type": row.event_type,
                "target_url": row.target_url,
                "attempt": row.attempt,
                "status": ResultStatus.FAILED,
                "http_status": None,
                "response_body": None,
                "error_message": ABANDONED,
                "duration_ms": 0,
                "attempted_at": now,
                "next_attempt_at": None,
            }
            for row in unrecorded
        ]
    )
    return len(unrecorded)


async def list_results(
    session: AsyncSession, *, customer_id: int, filters: ResultFilters, page: PageRequest
) -> tuple[Sequence[DeliveryResult], int]:
    """A page of the customer's delivery results, newest first, and how many match."""
    return await ResultRepository(session).page_of(
        customer_id=customer_id, filters=filters, page=page
    )


async def webhook_activity(
    session: AsyncSession,
    *,
    customer_id: int,
    webhook_ids: Sequence[int],
    period: timedelta,
    now: datetime,
) -> dict[int, WebhookActivity]:
    """Each of the customer's webhooks' attempts over `period` up to `now` (by whole hours:
    from the start of the hour `period` before the current one's end), and its latest attempt
    of all; NO_ACTIVITY for one never attempted (another customer's webhook too)."""
    results = ResultRepository(session)
    ids = list(dict.fromkeys(webhook_ids))
    since_hour = hour_of(now) + 1 - period // timedelta(hours=1)
    succeeded: dict[int, int] = {}
    failed: dict[int, int] = {}
    for webhook_id, status, attempts in await results.attempts_since(
        customer_id=customer_id, webhook_ids=ids, since_hour=since_hour
    ):
        tally = succeeded if status == ResultStatus.SUCCESS else failed
        tally[webhook_id] = tally.get(webhook_id, 0) + attempts
    activity = {
        webhook_id: NO_ACTIVITY._replace(
            succeeded=succeeded.get(webhook_id, 0), failed=failed.get(webhook_id, 0)
        )
        for webhook_id in ids
    }
    for webhook_id, at, status, http_status in await results.latest_attempts(
        customer_id=customer_id, webhook_ids=ids
    ):
        activity[webhook_id] = activity[webhook_id]._replace(
            last_attempt_at=at, last_status=status, last_http_status=http_status
        )
    return activity


async def prune_history(
    session: AsyncSession, *, older_than: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of results, and of finished events, from before `older_than`."""
    return await ResultRepository(session).prune(older_than=older_than, batch_size=batch_size)


async def fold_result_counts(session: AsyncSession) -> int:
    """Fold a batch of the results' hour counts into one row per key."""
    return await ResultRepository(session).fold_counts()


class Backlog(NamedTuple):
    due: int
    oldest_due_age_seconds: float  # 0 when nothing is due


async def stream_lag(settings: Settings) -> StreamLag | None:
    """The NATS stream's lag, with TUCANO_QUEUE=nats (None with the database queue)."""
    if settings.queue != "nats":
        return None
    return await read_stream_lag(servers_of(settings.nats_url), stream=settings.nats_stream)


async def delivery_backlog(database: Database) -> Backlog:
    """How many deliveries are due now (held or being sent included: those are what workers
    are behind on), and how long the oldest has been due (for /metrics)."""
    now = clock.now()
    async with database.read_session() as session:
        due, oldest = await DeliveryRepository(session).backlog(now=now)
    return Backlog(due, 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()))
