"""The delivery queue: workers claim due deliveries under a short lease, send them outside any
transaction, record the outcomes in batches, and give back what they did not attempt, through
one `QueueBackend` (backend.py) chosen once at start-up by `queue_for`."""

from __future__ import annotations

from datetime import timedelta

from tucano.config import Settings
from tucano.db.database import Database
from tucano.deliveries.queue.backend import QueueBackend
from tucano.deliveries.queue.nats import NatsQueue, servers_of, subject_prefix_of
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.deliveries.queue.sql import SqlQueue


def queue_for(database: Database, settings: Settings | None = None) -> QueueBackend:
    """The queue's back end: on NATS JetStream when the settings say so (TUCANO_QUEUE=nats);
    else in the database, on PostgreSQL the tuned one, which a benchmark shows pays
    (docs/performance.md), and on SQLite the plain one."""
    if settings is not None and settings.queue == "nats":
        return NatsQueue(
            database,
            servers_of(settings.nats_url),
            stream=settings.nats_stream,
            subject_prefix=subject_prefix_of(settings.nats_stream),
            poll_seconds=settings.delivery_poll_interval_seconds,
            mark_lease=timedelta(seconds=settings.delivery_lease_seconds),
        )
    return PostgresQueue(database) if database.dialect == "postgresql" else SqlQueue(database)
