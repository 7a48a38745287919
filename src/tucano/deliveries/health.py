"""A webhook's delivery health (its last success and the run of failures since), set from each
batch of recorded attempts, and read by webhooks.service.deactivate_failing_webhooks.

The rule: a success ends the failing run; a failure starts one unless one is running; each
attempt counts by the time it started, whenever it was recorded. It is one UPDATE for both
databases, computed from the row itself; on SQLite it runs inside the record's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

import orjson

from tucano.db.base import UTCDateTime, sqlite_time_text
from tucano.db.database import Database
from tucano.db.sqlite_handover import immediate_transaction
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


# The rule, one text for both databases, in terms of the row itself (w.) and the batch's row for
# it (b.), not of a copy read earlier: two workers' updates of one webhook build on each other.
_LAST_SUCCESS = """CASE WHEN w.last_success_at IS NULL OR b.succeeded_at > w.last_success_at
                THEN b.succeeded_at ELSE w.last_success_at END"""
# The failing run: its start, and the batch's failures, that came after the last success.
_FAILING_SINCE = f"""(SELECT min(f.at) FROM ({{failures}} UNION ALL SELECT w.failing_since) AS f
                 WHERE ({_LAST_SUCCESS}) IS NULL OR f.at > ({_LAST_SUCCESS}))"""  # noqa: S608
# A row is written only when its values may change.
_DELIVERY_HEALTH = f"""
UPDATE webhooks AS w
   SET last_success_at = {_LAST_SUCCESS},
       failing_since = {_FAILING_SINCE}
  FROM {{batch}} AS b
 WHERE w.id = b.id
   AND (b.succeeded_at IS NOT NULL OR w.failing_since IS NULL
        OR w.failing_since <= w.last_success_at
        OR w.failing_since > (SELECT min(f.at) FROM ({{failures}}) AS f))
"""  # noqa: S608 - our own constants
# Each database's spelling of the batch (one JSON array of DeliveryHealth) and of a row's failures.
_RECORD_ON_POSTGRES = _DELIVERY_HEALTH.format(
    batch="""(SELECT (x->>0)::bigint AS id, (x->>1)::timestamptz AS succeeded_at,
                  ARRAY(SELECT jsonb_array_elements_text(x->2)::timestamptz) AS failed_at
             FROM jsonb_array_elements($1::jsonb) AS x)""",
    failures="SELECT at FROM unnest(b.failed_at) AS failed(at)",
)
_RECORD_ON_SQLITE = _DELIVERY_HEALTH.format(
    batch="""(SELECT x.value ->> 0 AS id, x.value ->> 1 AS succeeded_at, x.value -> 2 AS failed_at
             FROM json_each(?) AS x)""",
    failures="SELECT value AS at FROM json_each(b.failed_at)",
)


async def record_delivery_health(database: Database, health: Sequence[DeliveryHealth]) -> None:
    """Set the webhooks' delivery health from `health` on its own, on either database."""
    if database.dialect == "postgresql":
        await record_delivery_health_on_postgres(database, health)
        return
    stored_time = UTCDateTime().bind_processor(database.engine.dialect)
    assert stored_time is not None

    def record(connection: sqlite3.Connection) -> None:
        with immediate_transaction(connection):
            record_delivery_health_on_sqlite(connection, health, stored_time)

    await database.run_on_sqlite(record)


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
    """The same, inside a transaction of Database.run_on_sqlite's `work`, which holds the write lock
    (`stored_time`: the column type's bind processor). Times are compared as the text SQLite
    keeps them as."""

    def as_stored(moment: datetime) -> str:
        return sqlite_time_text(stored_time(moment))

    if health:
        batch = [
            (
                h.webhook_id,
                None if h.succeeded_at is None else as_stored(h.succeeded_at),
                [as_stored(f) for f in h.failed_at],
            )
            for h in health
        ]
        connection.execute(_RECORD_ON_SQLITE, (orjson.dumps(batch).decode(),))
