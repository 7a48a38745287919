"""Cancellation: taking a deleted webhook's deliveries off the queue, and the last record of
those whose holder never recorded them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple, cast

from sqlalchemy import Table, delete, func, insert, literal, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.clock import clock
from tucano.db.bulk import in_parts, insert_many
from tucano.deliveries import result_counts
from tucano.deliveries.models import (
    CancelledDelivery,
    Delivery,
    DeliveryResult,
    Event,
    ResultStatus,
)

_EVENTS = cast(Table, Event.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)
_RESULTS = cast(Table, DeliveryResult.__table__)
_CANCELLED = cast(Table, CancelledDelivery.__table__)


async def cancel_deliveries_to(
    session: AsyncSession, *, customer_id: int, webhook_id: int, target_url: str, reason: str
) -> int:
    """Take every pending delivery to one of the customer's webhooks off the queue, so its
    history ends in words rather than at a retry that never comes: one waiting in the queue is
    recorded as an attempt that was not sent (FAILED, with `reason`); one a worker holds under
    its lease is that worker's to record (it hears of the deletion: worker/loop.py,
    `_on_webhook_change`), and is kept aside in case the worker never does
    (record_abandoned_cancellations). Returns how many were pending.

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
# attempt starts well before the lease ends (worker/loop.py, `_send_forever`) and is recorded
# within a second of its answer, so only a holder that stopped (killed, or paused past this)
# leaves it unrecorded.
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
    recorded = await recorded_since_claimed(
        session,
        # Attempt numbers are the delivery's own; the time only bounds the search (with room
        # for the clocks of other machines).
        (
            HeldDelivery(
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


class HeldDelivery(NamedTuple):
    customer_id: int
    webhook_id: int
    delivery_id: int
    claimed_at: datetime


async def recorded_since_claimed(
    session: AsyncSession, held: Iterable[HeldDelivery]
) -> set[tuple[int, int]]:
    """(delivery, attempt) of results these deliveries have since they were claimed: one index
    range per webhook (rare: a deletion racing a give-back, or a worker killed holding them)."""
    by_webhook: dict[tuple[int, int], list[HeldDelivery]] = {}
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
