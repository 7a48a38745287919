"""Hour counts of delivery results: the results list's `totalElements` without counting every
matching row (a busy merchant keeps millions of results for the retention period, and a count
over them grows with them; docs/adr/delivery-queue.md).

Every write of results appends, in the same transaction, how many it added per (customer, hour,
webhook, event type, status); pruning appends what it took away, as negative counts. These are
inserts, so workers never wait for each other on a count's row. A periodic job folds the rows
of each key into one (result_repository.fold_counts). A count adds up the hours that lie wholly
inside the range asked for, and counts the results of the partial hours at its two ends one by
one (at most two hours of rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

KEY = ("customer_id", "hour", "webhook_id", "event_type", "status")
HOUR = timedelta(hours=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_MOMENT = datetime.max.replace(tzinfo=UTC)
LAST_HOUR = (LAST_MOMENT - EPOCH) // HOUR  # the hour 9999-12-31T23:00Z starts


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
