"""The delivery queue: workers claim due deliveries under a short lease, send them outside any
transaction, record the outcomes in batches, and give back what they did not attempt, through
one `QueueBackend` (backend.py) chosen once at start-up by `queue_for`."""

from __future__ import annotations

from tucano.db.database import Database
from tucano.deliveries.queue.backend import QueueBackend
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.deliveries.queue.sql import SqlQueue


def queue_for(database: Database) -> QueueBackend:
    """The queue's back end for this database: on PostgreSQL the tuned one, which a benchmark
    shows pays (docs/performance.md); on SQLite the plain one."""
    return PostgresQueue(database) if database.dialect == "postgresql" else SqlQueue(database)
