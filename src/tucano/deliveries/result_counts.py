"""Hour counts of delivery results: the results list's `totalElements` without counting every
matching row (a busy merchant keeps millions of results for the retention period, and a count
over them grows with them; see docs/adr/delivery-queue.md).

Every write of results appends, in the same statement or transaction, how many it added per
(customer, hour, webhook, event type, status); pruning appends what it took away, as negative
counts. These are inserts, so workers never wait for each other on a count's row. A periodic job
folds the rows of each key into one; on PostgreSQL several processes may run it at once, each
row being deleted, and so added into a folded row, by one of them only.

A count adds up the hours that lie wholly inside the range asked for, and counts the results of
the partial hours at its two ends one by one (at most two hours of rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import orjson
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Table,
    Text,
    delete,
    func,
    insert,
    literal,
    select,
    tuple_,
)
from sqlalchemy import cast as cast_
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.deliveries.models import DeliveryResult, DeliveryResultCount

COUNTS = cast(Table, DeliveryResultCount.__table__)
RESULTS = cast(Table, DeliveryResult.__table__)
KEY = ("customer_id", "hour", "webhook_id", "event_type", "status")
HOUR = timedelta(hours=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_MOMENT = datetime.max.replace(tzinfo=UTC)
LAST_HOUR = (LAST_MOMENT - EPOCH) // HOUR  # the hour 9999-12-31T23:00Z starts
FOLD_BATCH = 1000  # keys per fold

# The hour of a result in SQL: PostgreSQL's epoch of a timestamptz is exact (numeric).
HOUR_ON_POSTGRES = "floor(extract(epoch FROM {column}) / 3600)::bigint"

# For queue.postgres's record: the counts of the results its `recorded` step inserted (RETURNING
# the key's columns and attempted_at).
COUNT_RECORDED_ON_POSTGRES = f"""
    INSERT INTO delivery_result_counts ({", ".join(KEY)}, result_count, folded)
    SELECT customer_id, {HOUR_ON_POSTGRES.format(column="attempted_at")}, webhook_id,
           event_type, status, count(*), false
      FROM recorded
     GROUP BY 1, 2, 3, 4, 5
"""  # noqa: S608 - our own column names


def hour_of(moment: datetime) -> int:
    """Whole hours from the epoch to `moment` (aware): the hour it falls in."""
    return (moment - EPOCH) // HOUR


def count_rows(
    results: Iterable[tuple[int, int, str, str, datetime]], *, sign: int = 1
) -> list[dict[str, Any]]:
    """Count rows to append for results given as (customer_id, webhook_id, event_type, status,
    attempted_at): one per key, `sign` 1 for results added and -1 for results removed."""
    counted = Counter(
        (customer_id, hour_of(attempted_at), webhook_id, event_type, status)
        for customer_id, webhook_id, event_type, status, attempted_at in results
    )
    return [
        {**dict(zip(KEY, key, strict=True)), "result_count": sign * n, "folded": False}
        for key, n in counted.items()
    ]


async def fold(session: AsyncSession) -> int:
    """Fold the rows of up to FOLD_BATCH keys that have rows not folded yet into one row per
    key (dropping keys whose results are all gone); returns how many rows went."""
    keys = (
        select(*(COUNTS.c[name] for name in KEY))
        .where(~COUNTS.c.folded)
        .distinct()
        .limit(FOLD_BATCH)
    )
    touched = [tuple(row) for row in (await session.execute(keys)).all()]
    if not touched:
        return 0
    gone = (
        await session.execute(
            delete(COUNTS)
            .where(tuple_(*(COUNTS.c[name] for name in KEY)).in_(_keys_of(session, touched)))
            .returning(*(COUNTS.c[name] for name in KEY), COUNTS.c.result_count)
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
        await session.execute(insert(COUNTS), folded)
    return len(gone)


def _keys_of(session: AsyncSession, keys: list[tuple[Any, ...]]) -> Select[Any]:
    """The keys as a subquery over one JSON parameter, so that both databases look each key up
    in the (customer_id, hour) index (see docs/adr/delivery-queue.md)."""
    batch = orjson.dumps(keys).decode()
    if session.get_bind().dialect.name == "postgresql":
        element = func.jsonb_array_elements(cast_(literal(batch, Text()), JSONB)).table_valued(
            "value"
        )
        field = element.c.value.op("->>")
        return select(
            cast_(field(0), BigInteger),
            cast_(field(1), BigInteger),
            cast_(field(2), BigInteger),
            field(3),
            field(4),
        ).select_from(element)
    element = func.json_each(batch).table_valued("value")
    return select(*(func.json_extract(element.c.value, f"$[{i}]") for i in range(len(KEY))))


def total_matching(
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
