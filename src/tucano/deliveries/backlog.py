"""The delivery backlog as an operator watches it: how many deliveries are due, and how long
the oldest of them has been due. Read at each scrape of /metrics (tucano.metrics.exposition)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import bindparam, text

from tucano.core.clock import clock
from tucano.db.base import UTCDateTime
from tucano.db.database import Database
from tucano.deliveries.models import FIRST_ATTEMPT_QUEUE, RETRY_QUEUE

# Due: its time has come and it is not recorded yet (held or being sent by a worker included:
# those are what a worker is behind on). Each queue spelled as its partial index's condition,
# so that each half reads only the due part of its index (docs/performance.md, "Metrics").
_DUE_SQL = f"""
SELECT count(*) AS due, min(next_attempt_at) AS oldest FROM (
    SELECT next_attempt_at FROM deliveries WHERE {FIRST_ATTEMPT_QUEUE} AND next_attempt_at <= :now
    UNION ALL
    SELECT next_attempt_at FROM deliveries WHERE {RETRY_QUEUE} AND next_attempt_at <= :now
) AS due
"""  # noqa: S608 - our own constants
_DUE = (
    text(_DUE_SQL).bindparams(bindparam("now", type_=UTCDateTime())).columns(oldest=UTCDateTime())
)


class Backlog(NamedTuple):
    due: int
    oldest_due_age_seconds: float  # 0 when nothing is due


async def delivery_backlog(database: Database) -> Backlog:
    """The backlog now, in one statement on the read engine."""
    now = clock.now()
    async with database.read_engine.connect() as connection:
        row = (await connection.execute(_DUE, {"now": now})).one()
    oldest: datetime | None = row.oldest
    age = 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())
    return Backlog(int(row.due), age)
