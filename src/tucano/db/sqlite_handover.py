"""Work handed to aiosqlite's thread in one go, for SQLite's hot paths."""

from __future__ import annotations

import sqlite3
from collections.abc import (
    Callable,
    Iterator,
)
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import Column, Table
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
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


_SQLITE = SQLiteDialect_aiosqlite()


@cache
def _stored_form(column: Column[Any]) -> Any:
    """How SQLAlchemy writes a value of `column` on SQLite (a UUID as hex, a timestamp as
    text), or None for a value written as it is."""
    return column.type.bind_processor(_SQLITE)


def sqlite_parameters(table: Table, values: dict[str, Any]) -> dict[str, Any]:
    """`values` of `table`'s columns as SQLAlchemy would bind them on SQLite, for a statement
    run on the sqlite3 connection itself (inside run_on_sqlite's `work`)."""
    bound = {}
    for name, value in values.items():
        processor = _stored_form(table.c[name])
        bound[name] = value if processor is None else processor(value)
    return bound
