"""The delivery queue on SQLite: a claim and a record are a few statements in one transaction
under the database's write lock, run on the driver's thread in one hand-over
(Database.run_on_sqlite), the batch's ids travelling as one JSON array (why:
docs/adr/delivery-queue.md)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from sqlalchemy import Table

from tucano.db.database import Database
from tucano.db.sqlite_handover import immediate_transaction
from tucano.deliveries import result_counts
from tucano.deliveries.health import DeliveryHealth, record_delivery_health_on_sqlite
from tucano.deliveries.models import (
    FIRST_ATTEMPT_QUEUE,
    RETRY_QUEUE,
    Delivery,
    DeliveryResult,
    ResultStatus,
)
from tucano.deliveries.queue.backend import (
    CLAIMED_COLUMNS,
    NOT_LEASED,
    RESULT_NAMES,
    ClaimedRow,
    OutcomeRow,
    vanished_retry,
)

_DELIVERIES = cast(Table, Delivery.__table__)
_RESULTS = cast(Table, DeliveryResult.__table__)

# Left out by host as on PostgreSQL (postgres._NOT_TO_HOSTS).
_DUE = f"""
SELECT id FROM deliveries
 WHERE {{queue}} AND next_attempt_at <= ? AND {NOT_LEASED.format(now="?")}
   AND webhook_id NOT IN (SELECT value FROM json_each(?))
   AND (? = '[]' OR NOT EXISTS (
       SELECT 1 FROM webhooks AS w, json_each(?) AS k
        WHERE w.id = deliveries.webhook_id
          AND lower(substr(w.target_url, 1, length(k.value))) = k.value
          AND substr(w.target_url, length(k.value) + 1, 1) IN ('', '/', '?', '#')))
 ORDER BY next_attempt_at LIMIT ?
"""  # noqa: S608 - our own constants
_CLAIM = """
UPDATE deliveries SET lease_until = ?, claim_token = ?, updated_at = ?
 WHERE id IN (SELECT value FROM json_each(?))
"""
# SQLite's RETURNING cannot reach other tables.
_CLAIMED = f"""
SELECT {CLAIMED_COLUMNS.format(d="d")}
  FROM deliveries AS d
  JOIN events AS e ON e.id = d.event_id
  LEFT JOIN webhooks AS w ON w.id = d.webhook_id
 WHERE d.id IN (SELECT value FROM json_each(?))
"""  # noqa: S608 - our own constants

_INSERT_RESULT = (
    f"INSERT INTO delivery_results ({', '.join(RESULT_NAMES)}) "  # noqa: S608 - our own names
    f"VALUES ({', '.join(':' + name for name in RESULT_NAMES)})"
)
_COUNT_NAMES = (*result_counts.KEY, "result_count", "folded")
_INSERT_COUNT = (
    f"INSERT INTO delivery_result_counts ({', '.join(_COUNT_NAMES)}) "  # noqa: S608 - ours
    f"VALUES ({', '.join(':' + name for name in _COUNT_NAMES)})"
)
_QUEUED = "SELECT id FROM deliveries WHERE id IN (SELECT value FROM json_each(?))"
_FINISH = "DELETE FROM deliveries WHERE id = ? AND claim_token = ?"
_RETRY = """
UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = ?, claim_token = NULL,
       lease_until = NULL, updated_at = ?
 WHERE id = ? AND claim_token = ?
"""


def _stored_utc(value: Any) -> datetime:
    """A time as SQLite keeps it (naive UTC text, see db.base.UTCDateTime), aware."""
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


class SqliteQueue:
    """QueueBackend on SQLite."""

    async def claim(
        self,
        database: Database,
        *,
        retries: int,
        limit: int,
        now: datetime,
        until: datetime,
        token: str,
        exclude_webhooks: Sequence[int],
        exclude_hosts: Sequence[str],
    ) -> list[ClaimedRow]:
        stored_time = _DELIVERIES.c.next_attempt_at.type.bind_processor(database.engine.dialect)
        assert stored_time is not None
        at, lease_end = stored_time(now), stored_time(until)
        excluded = orjson.dumps(list(exclude_webhooks)).decode()
        hosts = orjson.dumps(list(exclude_hosts)).decode()

        def claim(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            with immediate_transaction(connection):  # nobody else claims meanwhile
                ids = [
                    delivery_id
                    for (delivery_id,) in connection.execute(
                        _DUE.format(queue=RETRY_QUEUE), (at, at, excluded, hosts, hosts, retries)
                    )
                ]
                ids += [
                    delivery_id
                    for (delivery_id,) in connection.execute(
                        _DUE.format(queue=FIRST_ATTEMPT_QUEUE),
                        (at, at, excluded, hosts, hosts, limit - len(ids)),
                    )
                ]
                if not ids:
                    return []
                claimed = orjson.dumps(ids).decode()
                connection.execute(_CLAIM, (lease_end, token, at, claimed))
                return connection.execute(_CLAIMED, (claimed,)).fetchall()

        rows = [ClaimedRow._make(row) for row in await database.run_on_sqlite(claim)]
        # SQLite keeps booleans as integers, and times as naive UTC text.
        return [
            row._replace(
                is_active=None if row.is_active is None else bool(row.is_active),
                event_created_at=_stored_utc(row.event_created_at),
            )
            for row in rows
        ]

    async def record(
        self,
        database: Database,
        rows: Sequence[OutcomeRow],
        *,
        now: datetime,
        health: Sequence[DeliveryHealth],
    ) -> None:
        """The same as PostgreSQL's record, and the webhooks' health, in one transaction."""
        stored_time = _RESULTS.c.attempted_at.type.bind_processor(database.engine.dialect)
        assert stored_time is not None
        ids = orjson.dumps([row.delivery_id for row in rows]).decode()
        stored_now = stored_time(now)
        # Each result with times as SQLite stores them, and as its columns by name.
        stored = [
            row._replace(
                attempted_at=stored_time(row.attempted_at),
                next_attempt_at=(
                    None if row.next_attempt_at is None else stored_time(row.next_attempt_at)
                ),
            )
            for row in rows
        ]
        results = [row._asdict() for row in stored]
        finished = [(r.delivery_id, r.claim_token) for r in rows if r.next_attempt_at is None]
        retries = [
            (result["next_attempt_at"], stored_now, result["delivery_id"], result["claim_token"])
            for result in results
            if result["next_attempt_at"] is not None
        ]

        def record(connection: sqlite3.Connection) -> None:
            with immediate_transaction(connection):
                queued = {delivery_id for (delivery_id,) in connection.execute(_QUEUED, (ids,))}
                for i, row in enumerate(stored):
                    if row.status == ResultStatus.PENDING_RETRY and row.delivery_id not in queued:
                        results[i] = vanished_retry(row)._asdict()
                connection.executemany(_INSERT_RESULT, results)
                connection.executemany(
                    _INSERT_COUNT,
                    result_counts.count_rows(
                        (row.customer_id, row.webhook_id, row.event_type, status, row.attempted_at)
                        for row, status in zip(
                            rows, (result["status"] for result in results), strict=True
                        )
                    ),
                )
                if finished:
                    connection.executemany(_FINISH, finished)
                if retries:
                    connection.executemany(_RETRY, retries)
                record_delivery_health_on_sqlite(connection, health, stored_time)

        await database.run_on_sqlite(record)
