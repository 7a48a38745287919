"""Telling a database that cannot be used just now (503) from a fault in Tucano (500)."""

from __future__ import annotations

import sqlite3


def is_database_unavailable(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) says the database could not be used just now: a
    connection lost or refused, the server out of connections, the pool exhausted, a statement
    or lock timeout run out, SQLite's lock held past its busy timeout.
    Such a request is worth retrying (503), unlike a fault in Tucano (500)."""
    import asyncpg
    from sqlalchemy import exc as sa

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(
            current,
            sa.TimeoutError  # no pooled connection free in time
            | asyncpg.PostgresConnectionError  # lost, or never made
            # Terminated by an administrator, shutting down, or a statement_timeout an
            # operator set run out (QueryCanceledError is one of these).
            | asyncpg.OperatorInterventionError
            | asyncpg.LockNotAvailableError  # an operator's lock_timeout: a lock held elsewhere
            | asyncpg.InterfaceError  # the connection is closed or in an unusable state
            # max_connections, or a role's or database's limit, reached: full for now. (Not
            # the other resources of its class: a statement out of shared memory for its locks
            # fails the same way each time it is retried.)
            | asyncpg.TooManyConnectionsError
            | ConnectionError,
        ):
            return True
        if isinstance(current, asyncpg.ObjectNotInPrerequisiteStateError) and (
            "not currently accepting connections" in str(current)
        ):
            return True  # ALTER DATABASE ... ALLOW_CONNECTIONS false, as during maintenance
        if isinstance(current, asyncpg.InternalClientError) and "another operation" in str(current):
            # The server closed the connection (its last message was being read) just as the
            # pool handed it out; the statement was never sent.
            return True
        if isinstance(current, sqlite3.OperationalError) and "locked" in str(current):
            return True  # another writer held SQLite's lock past the busy timeout
        current = current.__cause__ or current.__context__
    return False
