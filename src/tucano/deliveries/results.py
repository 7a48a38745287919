"""The delivery results history: the results list (A6) and pruning old results and events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.paging import PageRequest
from tucano.deliveries import result_counts
from tucano.deliveries.models import Delivery, DeliveryResult, Event
from tucano.events.types import EventType


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
