"""Every statement on the results history: delivery_results (one row per attempt) and its hour
counts (delivery_result_counts, see result_counts.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    delete,
    func,
    insert,
    literal,
    select,
    tuple_,
    union_all,
)

from tucano.core.paging import PageRequest
from tucano.db.repository import Repository, in_parts
from tucano.deliveries import result_counts
from tucano.deliveries.models import (
    Delivery,
    DeliveryResult,
    DeliveryResultCount,
    Event,
    ResultStatus,
)
from tucano.deliveries.result_counts import EPOCH, HOUR, KEY, LAST_HOUR, LAST_MOMENT
from tucano.events.types import EventType

RESULTS = cast(Table, DeliveryResult.__table__)
COUNTS = cast(Table, DeliveryResultCount.__table__)
FOLD_BATCH = 1000  # keys per fold
# Offsets from which the results list counts before it reads a page (see page_of).
DEEP_OFFSET = 10_000


@dataclass(frozen=True)
class ResultFilters:
    event_type: EventType | None = None
    webhook_id: int | None = None
    status: str | None = None
    start: datetime | None = None
    end: datetime | None = None


class HeldDelivery(NamedTuple):
    """A delivery as a worker held it: whose, and since when."""

    customer_id: int
    webhook_id: int
    delivery_id: int
    claimed_at: datetime


class ResultRepository(Repository[DeliveryResult]):
    model = DeliveryResult

    async def add(self, results: Sequence[dict[str, Any]]) -> None:
        """Insert result rows (the columns of delivery_results by name) and their hour counts."""
        if not results:
            return
        await self.session.execute(insert(RESULTS), list(results))
        await self.session.execute(
            insert(COUNTS),
            result_counts.count_rows(
                (r["customer_id"], r["webhook_id"], r["event_type"], r["status"], r["attempted_at"])
                for r in results
            ),
        )

    async def page_of(
        self, *, customer_id: int, filters: ResultFilters, page: PageRequest
    ) -> tuple[Sequence[DeliveryResult], int]:
        """A page of the customer's matched results, newest first, and how many match."""
        matched, on_counts = [], []  # the filters but the dates, on results and on counts alike
        counts = COUNTS.c
        if filters.event_type is not None:
            matched.append(DeliveryResult.event_type == filters.event_type.value)
            on_counts.append(counts.event_type == filters.event_type.value)
        if filters.webhook_id is not None:
            matched.append(DeliveryResult.webhook_id == filters.webhook_id)
            on_counts.append(counts.webhook_id == filters.webhook_id)
        if filters.status is not None:
            matched.append(DeliveryResult.status == filters.status)
            on_counts.append(counts.status == filters.status)
        total = _total_matching(
            customer_id, matched, on_counts, start=filters.start, end=filters.end
        ).label("total")
        condition = [DeliveryResult.customer_id == customer_id, *matched]
        if filters.start is not None:
            condition.append(DeliveryResult.attempted_at >= filters.start)
        if filters.end is not None:
            condition.append(DeliveryResult.attempted_at <= filters.end)
        if page.offset >= DEEP_OFFSET:
            # Far down, the total first: a page past the end is then answered without stepping
            # over every matching result to find it empty.
            counted = int(await self.session.scalar(select(total)) or 0)
            if page.offset >= counted:
                return [], counted
        # The page and the total in one statement: one round trip, and on PostgreSQL one
        # snapshot, so a result recorded meanwhile cannot make them disagree.
        rows = (
            await self.session.execute(
                select(DeliveryResult, total)
                .where(*condition)
                .order_by(DeliveryResult.attempted_at.desc(), DeliveryResult.id.desc())
                .offset(page.offset)
                .limit(page.size)
            )
        ).all()
        if rows:
            return [row[0] for row in rows], int(rows[0][1])
        # Past the last page (or nothing matches): the total alone.
        return [], int(await self.session.scalar(select(total)) or 0)

    async def count_recoverable(
        self,
        *,
        customer_id: int,
        webhook_id: int,
        event_type: str,
        since: datetime,
        until: datetime,
    ) -> int:
        """How many events recoverable_events finds."""
        found = recoverable_events(
            customer_id=customer_id,
            webhook_id=webhook_id,
            event_type=event_type,
            since=since,
            until=until,
        )
        counted = select(func.count()).select_from(found.subquery())
        return int(await self.session.scalar(counted) or 0)

    async def attempts_since(
        self, *, customer_id: int, webhook_ids: Sequence[int], since_hour: int
    ) -> list[tuple[int, str, int]]:
        """(webhook, status, attempts) of these webhooks' results about the receiver (success,
        or a failure retried or final) from the hour `since_hour` on, added up from the hour
        counts."""
        counts = COUNTS.c
        rows = await self.session.execute(
            select(counts.webhook_id, counts.status, func.sum(counts.result_count))
            .where(
                counts.customer_id == customer_id,
                counts.webhook_id.in_(webhook_ids),
                counts.hour >= since_hour,
                counts.status.in_(
                    (ResultStatus.SUCCESS, ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED)
                ),
            )
            .group_by(counts.webhook_id, counts.status)
        )
        return [(int(w), str(status), int(n or 0)) for w, status, n in rows]

    async def latest_attempts(
        self, *, customer_id: int, webhook_ids: Sequence[int]
    ) -> list[tuple[int, datetime, str, int | None]]:
        """(webhook, attempted at, status, HTTP status) of each webhook's latest result, in one
        statement: one index lookup per webhook, however long its history."""
        r = RESULTS.c
        latest = [
            select(literal(webhook_id).label("webhook_id"), r.attempted_at, r.status, r.http_status)
            .where(r.customer_id == customer_id, r.webhook_id == webhook_id)
            .order_by(r.attempted_at.desc(), r.id.desc())
            .limit(1)
            .subquery()
            for webhook_id in webhook_ids
        ]
        if not latest:
            return []
        rows = await self.session.execute(union_all(*(select(*sub.c) for sub in latest)))
        return [(int(w), at, str(status), http) for w, at, status, http in rows]

    async def recorded_since_claimed(self, held: Iterable[HeldDelivery]) -> set[tuple[int, int]]:
        """(delivery, attempt) of results these deliveries have since they were claimed: one
        index range per webhook (rare: a deletion racing a give-back, or a worker killed
        holding them)."""
        by_webhook: dict[tuple[int, int], list[HeldDelivery]] = {}
        for h in held:
            by_webhook.setdefault((h.customer_id, h.webhook_id), []).append(h)
        found: set[tuple[int, int]] = set()
        r = RESULTS.c
        for (customer_id, webhook_id), theirs in by_webhook.items():
            since = min(h.claimed_at for h in theirs)
            for part in in_parts([h.delivery_id for h in theirs]):
                found.update(
                    (row.delivery_id, row.attempt)
                    for row in await self.session.execute(
                        select(r.delivery_id, r.attempt).where(
                            r.customer_id == customer_id,
                            r.webhook_id == webhook_id,
                            r.attempted_at >= since,
                            r.delivery_id.in_(part),
                        )
                    )
                )
        return found

    async def prune(self, *, older_than: datetime, batch_size: int) -> int:
        """Delete one batch of results, and of finished events, from before `older_than`;
        returns how many rows went (the scheduler calls again while there are more)."""
        old_results = (
            select(DeliveryResult.id)
            .where(DeliveryResult.attempted_at < older_than)
            .limit(batch_size)
            .scalar_subquery()
        )
        gone = (
            await self.session.execute(
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
            # The hour counts lose them too.
            await self.session.execute(
                insert(COUNTS),
                result_counts.count_rows(((r[0], r[1], r[2], r[3], r[4]) for r in gone), sign=-1),
            )
        unfinished = select(Delivery.id).where(Delivery.event_id == Event.id)
        old_events = (
            select(Event.id)
            .where(Event.created_at < older_than, ~unfinished.exists())
            .limit(batch_size)
            .scalar_subquery()
        )
        events = await self.session.execute(delete(Event).where(Event.id.in_(old_events)))
        return len(gone) + int(getattr(events, "rowcount", 0) or 0)

    async def fold_counts(self) -> int:
        """Fold the rows of up to FOLD_BATCH keys that have rows not folded yet into one row per
        key (dropping keys whose results are all gone); returns how many rows went. Each row is
        deleted, and so added into a folded row, by one process only."""
        key_columns = [COUNTS.c[name] for name in KEY]
        touched = (
            await self.session.execute(
                select(*key_columns).where(~COUNTS.c.folded).distinct().limit(FOLD_BATCH)
            )
        ).all()
        if not touched:
            return 0
        gone = (
            await self.session.execute(
                delete(COUNTS)
                .where(tuple_(*key_columns).in_([tuple(row) for row in touched]))
                .returning(*key_columns, COUNTS.c.result_count)
            )
        ).all()
        sums: Counter[tuple[Any, ...]] = Counter()
        for row in gone:
            sums[tuple(row[: len(KEY)])] += row[-1]
        folded = [
            {**dict(zip(KEY, key, strict=True)), "result_count": n, "folded": True}
            for key, n in sums.items()
            if n != 0
        ]
        if folded:
            await self.session.execute(insert(COUNTS), folded)
        return len(gone)


def recoverable_events(
    *,
    customer_id: int,
    webhook_id: int,
    event_type: str,
    since: datetime,
    until: datetime,
) -> Select[Any]:
    """(event_id) of the customer's events of `event_type` whose newest result for the webhook
    (by attemptedAt, then resultId: the first the results list shows) is FAILED or EXHAUSTED,
    attempted between `since` and `until` inclusive, and that have no delivery to it pending.
    One pass over the webhook's results since `since`, numbered per event: a later result of
    an event is always inside that pass, so no result is looked up one event at a time
    (delivery_results has no index by event)."""
    r = RESULTS.c
    newest = (
        select(
            r.event_id,
            r.status,
            r.attempted_at,
            func.row_number()
            .over(partition_by=r.event_id, order_by=(r.attempted_at.desc(), r.id.desc()))
            .label("place"),
        )
        .where(r.customer_id == customer_id, r.webhook_id == webhook_id, r.attempted_at >= since)
        .subquery("newest")
    )
    n = newest.c
    # Looked up by the event's index (an event has a delivery per webhook at most, so a few
    # rows), never by the webhook's: that one holds the webhook's whole backlog, which may be
    # as large as the failures (a recovery a moment ago), and a planner that thinks it small
    # would walk it for each event. Adding 0 keeps both planners off ix_deliveries_webhook.
    pending = select(Delivery.id).where(
        Delivery.event_id == n.event_id,
        Delivery.webhook_id + 0 == webhook_id,
        Delivery.customer_id == customer_id,
    )
    return (
        select(n.event_id)
        .join(Event, Event.id == n.event_id)
        .where(
            n.place == 1,
            n.status.in_((ResultStatus.FAILED, ResultStatus.EXHAUSTED)),
            n.attempted_at <= until,
            Event.customer_id == customer_id,
            Event.event_type == event_type,
            ~pending.exists(),
        )
    )


def _total_matching(
    customer_id: int,
    conditions: Sequence[ColumnElement[bool]],
    count_conditions: Sequence[ColumnElement[bool]],
    *,
    start: datetime | None,
    end: datetime | None,
) -> Any:
    """How many of the customer's results match, as one SQL expression: `conditions` on the
    results and the same filters as `count_conditions` on the counts, `start`/`end` (inclusive)
    on attemptedAt. Its subqueries never correlate, so it can sit beside a page of the results
    in one statement."""
    # Hours wholly inside [start, end]: from the first that starts at or after `start` up to,
    # not including, the one holding the microsecond after `end`.
    # (In timedeltas: the hour after 9999-12-31T23:00Z is no datetime.)
    first_full = None if start is None else -(-(start - EPOCH) // HOUR)
    end_full = None if end is None else (end - EPOCH + timedelta(microseconds=1)) // HOUR
    on_results = [RESULTS.c.customer_id == customer_id, *conditions]

    def results_between(low: datetime, high: datetime, *, high_included: bool) -> Any:
        upper = RESULTS.c.attempted_at <= high if high_included else RESULTS.c.attempted_at < high
        return (
            select(func.count())
            .select_from(RESULTS)
            .where(*on_results, RESULTS.c.attempted_at >= low, upper)
            .correlate(None)
            .scalar_subquery()
        )

    if (
        start is not None
        and first_full is not None
        and (first_full > LAST_HOUR or (end_full is not None and first_full >= end_full))
    ):
        # No whole hour inside (or none after a start in the last hour there is): the rows
        # themselves, at most two hours of them.
        return results_between(start, end or LAST_MOMENT, high_included=True)
    hours = [COUNTS.c.customer_id == customer_id, *count_conditions]
    if first_full is not None:
        hours.append(COUNTS.c.hour >= first_full)
    if end_full is not None:
        hours.append(COUNTS.c.hour < end_full)
    total: Any = (
        select(func.coalesce(func.sum(COUNTS.c.result_count), 0))
        .where(*hours)
        .correlate(None)
        .scalar_subquery()
    )
    if start is not None and first_full is not None:
        total = total + results_between(start, EPOCH + first_full * HOUR, high_included=False)
    if end is not None and end_full is not None and end_full <= LAST_HOUR:
        total = total + results_between(EPOCH + end_full * HOUR, end, high_included=True)
    return total
