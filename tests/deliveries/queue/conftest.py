"""Every test here runs against every back end of the queue, on every database it runs on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from tests.support.queue import RelayingNatsQueue
from tucano.db.database import Database
from tucano.deliveries.queue.backend import QueueBackend
from tucano.deliveries.queue.nats import NatsQueue, servers_of
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.deliveries.queue.sql import SqlQueue

# The back ends, by name, and the databases each runs on (NATS keeps its record in PostgreSQL).
BACKENDS = {
    "sql": (SqlQueue, ("sqlite", "postgresql")),
    "postgres": (PostgresQueue, ("postgresql",)),
    "nats": (NatsQueue, ("postgresql",)),
}


@pytest.fixture(params=sorted(BACKENDS))
async def queue(
    request: pytest.FixtureRequest, private_database: Database
) -> AsyncIterator[QueueBackend]:
    if request.param != "nats":
        backend, _ = BACKENDS[request.param]
        yield backend(private_database)
        return
    # A stream of its own per test: the module's tests share their database, not their messages.
    name = uuid.uuid4().hex[:12]
    nats_queue = RelayingNatsQueue(
        private_database,
        servers_of(request.getfixturevalue("nats_cluster").url),
        stream=f"T{name}",
        subject_prefix=f"t{name}",
    )
    yield nats_queue
    await nats_queue.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A back end on a database it does not run on is no test at all: left out, not skipped."""
    dropped = []
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params  # type: ignore[attr-defined]
        if (
            params
            and "queue" in params
            and "private_database" in params
            and params["private_database"] not in BACKENDS[params["queue"]][1]
        ):
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
