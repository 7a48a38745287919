"""SQLite connections for reads that run on the event loop's own thread: no hand-over to a
driver thread per call (docs/adr/database.md, "Reads on the event loop's thread").

aiosqlite gives each connection a thread and sends every call to it; for an index lookup that
SQLite answers in microseconds, those hand-overs cost many times the statement. A WAL reader
never waits for a writer, so such a read cannot hold the loop up for longer than it takes."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from functools import partial
from typing import Any

import aiosqlite

# How long an inline read may wait for a lock (milliseconds). A WAL reader waits only in
# rare moments (the WAL index being rebuilt after a crash); meanwhile the whole loop waits, so
# briefly, and past it the request is a 503 to retry.
INLINE_BUSY_TIMEOUT_MS = 200


class _RunAtOnce:
    """In place of aiosqlite's queue to its thread, for the callers that put work on it
    directly (SQLAlchemy's isolation_level setter): the work runs as it is put."""

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as exc:  # handed to the awaiting caller, as aiosqlite's thread does
            future.set_exception(exc)
        else:
            future.set_result(result)


class InlineSqliteConnection(aiosqlite.Connection):
    """An aiosqlite.Connection whose calls run where they are awaited, without its thread."""

    def __init__(self, connector: Callable[[], sqlite3.Connection]) -> None:
        super().__init__(connector, iter_chunk_size=64)
        self._tx = _RunAtOnce()  # type: ignore[assignment]

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._running or self._connection is None:
            raise ValueError("Connection closed")
        return fn(*args, **kwargs)

    async def _connect(self) -> InlineSqliteConnection:
        if self._connection is None:
            self._connection = self._connector()
        return self

    def __await__(self) -> Any:  # no thread to start
        return self._connect().__await__()

    def stop(self) -> None:
        self._running = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def inline_connector(args: list[Any], options: dict[str, Any]) -> Callable[[], Any]:
    """An `async_creator` for create_async_engine: a new InlineSqliteConnection, opened with
    the arguments the dialect makes of the URL (its create_connect_args)."""

    async def connect() -> InlineSqliteConnection:
        # check_same_thread off: the pool may close a connection from the garbage collector.
        connector = partial(sqlite3.connect, *args, **{**options, "check_same_thread": False})
        return await InlineSqliteConnection(connector)._connect()

    return connect


def open_inline_reader(args: list[Any], options: dict[str, Any]) -> sqlite3.Connection:
    """An sqlite3 connection for CompiledSqliteRead: read-only, in autocommit (each SELECT its
    own snapshot), with the inline busy timeout."""
    connection: sqlite3.Connection = sqlite3.connect(
        *args, **{**options, "check_same_thread": False, "isolation_level": None}
    )
    connection.execute(f"PRAGMA busy_timeout={INLINE_BUSY_TIMEOUT_MS}")
    connection.execute("PRAGMA query_only=ON")
    return connection
