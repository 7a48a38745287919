"""Work handed to aiosqlite's thread in one go, for SQLite's hot paths."""

from __future__ import annotations

import sqlite3
from collections.abc import (
    Callable,
    Iterator,
)
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy.ext.asyncio import (
    AsyncConnection,
)

T = TypeVar("T")


async def run_on_sqlite(connection: AsyncConnection, work: Callable[[sqlite3.Connection], T]) -> T:
    """SQLite only: `work(sqlite3 connection)` on the thread aiosqlite keeps for the connection
    under `connection`, as one hand-over, inside whatever transaction `connection` has open.

    For the hot paths (the outbox, the delivery queue), whose statements cost SQLite far less
    than each hand-over does (docs/adr/database.md). The caller holds `connection`, so nothing
    else uses the sqlite3 connection meanwhile.
    """
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection  # aiosqlite.Connection
    # aiosqlite's own way of running a call on its thread (every public method goes through it).
    result: T = await driver._execute(work, driver._conn)  # type: ignore[union-attr]
    return result


@contextmanager
def immediate_transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A transaction that takes SQLite's write lock up front (see _on_begin), inside `work` of
    run_on_sqlite; rolled back if the block raises."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
