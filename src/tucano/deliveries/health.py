"""A webhook's delivery health (its last success and the run of failures since), set from each
batch of recorded attempts, and read by webhooks.service.deactivate_failing_webhooks.

The rule, `next_delivery_health`: a success ends the failing run; a failure starts one unless one
is running; each attempt counts by the time it started, whenever it was recorded. PostgreSQL runs
it as one UPDATE computed from the row itself, so that two workers' updates of one webhook build
on each other; SQLite runs it in Python inside the record's transaction, under the write lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import orjson

from tucano.db.base import sqlite_time_text
from tucano.db.database import Database
from tucano.deliveries.models import ResultStatus

if TYPE_CHECKING:
    from tucano.deliveries.queue.backend import Outcome


class DeliveryHealth(NamedTuple):
    """What a batch of recorded attempts says of one webhook's health. Attempts are recorded as
    they finish, not as they start, so a batch may hold attempts older than one recorded before:
    each is placed by the time it started."""

    webhook_id: int
    # The start of its latest successful attempt in the batch, if any.
    succeeded_at: datetime | None
    # The starts of its failed attempts in the batch (after succeeded_at, the others count for
    # nothing).
    failed_at: tuple[datetime, ...]


def delivery_health(outcomes: Sequence[Outcome]) -> list[DeliveryHealth]:
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
        DeliveryHealth(
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


T = TypeVar("T", datetime, str)


def next_delivery_health(
    last_success_at: T | None,
    failing_since: T | None,
    *,
    succeeded_at: T | None,
    failed_at: Sequence[T],
) -> tuple[T | None, T | None]:
    """A webhook's (last_success_at, failing_since) once a batch is recorded: its failing run
    starts at the first failed attempt that started after its last success, whenever each was
    recorded. (The same rule as _RECORD_ON_POSTGRES.)"""
    if succeeded_at is not None and (last_success_at is None or succeeded_at > last_success_at):
        last_success_at = succeeded_at
    if (
        failing_since is not None
        and last_success_at is not None
        and failing_since <= last_success_at
    ):
        failing_since = None
    later = [f for f in failed_at if last_success_at is None or f > last_success_at]
    if later:
        first = min(later)
        failing_since = first if failing_since is None else min(failing_since, first)
    return last_success_at, failing_since


# next_delivery_health in terms of the row itself (w.), not of a copy read in the statement; a
# row is written only when its values may change.
_RECORD_ON_POSTGRES = """
UPDATE webhooks AS w
   SET last_success_at = GREATEST(w.last_success_at, b.succeeded_at),
       failing_since = LEAST(
           CASE WHEN GREATEST(w.last_success_at, b.succeeded_at) IS NULL
                  OR w.failing_since > GREATEST(w.last_success_at, b.succeeded_at)
                THEN w.failing_since END,
           (SELECT min(f) FROM unnest(b.failed_at) AS f
             WHERE GREATEST(w.last_success_at, b.succeeded_at) IS NULL
                OR f > GREATEST(w.last_success_at, b.succeeded_at)))
  FROM (SELECT (x->>0)::bigint AS id, (x->>1)::timestamptz AS succeeded_at,
               ARRAY(SELECT jsonb_array_elements_text(x->2)::timestamptz) AS failed_at
          FROM jsonb_array_elements($1::jsonb) AS x) AS b
 WHERE w.id = b.id
   AND (b.succeeded_at IS NOT NULL OR w.failing_since IS NULL
        OR w.failing_since > (SELECT min(f) FROM unnest(b.failed_at) AS f))
"""


async def record_delivery_health_on_postgres(
    database: Database, health: Sequence[DeliveryHealth]
) -> None:
    """After a batch of attempts, in a statement of its own apart from their records: the
    health is advisory, and the next batch sets it again."""
    if health:
        async with database.driver_connection() as connection:
            await connection.execute(
                _RECORD_ON_POSTGRES, orjson.dumps([tuple(h) for h in health]).decode()
            )


def record_delivery_health_on_sqlite(
    connection: sqlite3.Connection,
    health: Sequence[DeliveryHealth],
    stored_time: Callable[[datetime], datetime],
) -> None:
    """The same, inside a transaction of db.run_on_sqlite's `work`, which holds the write lock
    (`stored_time`: the column type's bind processor). Times are compared as the text SQLite
    keeps them as."""

    def as_stored(moment: datetime) -> str:
        return sqlite_time_text(stored_time(moment))

    if not health:
        return
    ids = orjson.dumps([h.webhook_id for h in health]).decode()
    stored = {
        webhook_id: (last_success_at, failing_since)
        for webhook_id, last_success_at, failing_since in connection.execute(
            "SELECT id, last_success_at, failing_since FROM webhooks"
            " WHERE id IN (SELECT value FROM json_each(?))",
            (ids,),
        )
    }
    changes = []
    for h in health:
        if h.webhook_id not in stored:
            continue
        before = stored[h.webhook_id]
        after = next_delivery_health(
            *before,
            succeeded_at=None if h.succeeded_at is None else as_stored(h.succeeded_at),
            failed_at=[as_stored(f) for f in h.failed_at],
        )
        if after != before:
            changes.append((*after, h.webhook_id))
    connection.executemany(
        "UPDATE webhooks SET last_success_at = ?, failing_since = ? WHERE id = ?", changes
    )
