"""Every test here runs against every back end of the queue, on every database it runs on."""

from __future__ import annotations

import pytest

from tucano.db.database import Database
from tucano.deliveries.queue.backend import QueueBackend
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.deliveries.queue.sql import SqlQueue

# The back ends in the database, by name, and the databases each runs on.
BACKENDS = {
    "sql": (SqlQueue, ("sqlite", "postgresql")),
    "postgres": (PostgresQueue, ("postgresql",)),
}


@pytest.fixture(params=sorted(BACKENDS))
def queue(request: pytest.FixtureRequest, private_database: Database) -> QueueBackend:
    backend, _ = BACKENDS[request.param]
    return backend(private_database)


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
