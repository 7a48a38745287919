"""Engines per dialect: SQLite's setup and one writer, PostgreSQL's pool, asyncpg's own pool."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    create_async_engine,
)
from sqlalchemy.pool import PoolResetState
from sqlalchemy.util import await_

from tucano.db.fair_pool import FirstComePool
from tucano.db.sqlite_inline import INLINE_BUSY_TIMEOUT_MS, inline_connector

_BEGIN_PENDING = "tucano_begin_pending"
# The SQLite database holds sealed secrets and the sandbox's key: its owner's alone. SQLite
# gives its -wal and -shm files the database file's mode.
SQLITE_FILE_MODE = 0o600


def create_private_sqlite_file(database_url: str) -> None:
    """Create the SQLite file of `database_url`, empty and readable by its owner only, if it
    is not there yet (sqlite3 would create it with the umask's mode, often world-readable)."""
    url = make_url(database_url)
    path = url.database
    if url.get_backend_name() != "sqlite" or not path or path.startswith("file:"):
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SQLITE_FILE_MODE))
    except FileExistsError:
        return


def _configure_sqlite(
    engine: AsyncEngine, *, read_only: bool = False, inline: bool = False
) -> None:
    # Writers take the write lock up front (see _on_begin); readers only a snapshot (WAL lets
    # them read while another connection, or another process, writes).
    begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # SQLAlchemy, not the driver, starts transactions (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        busy_timeout = INLINE_BUSY_TIMEOUT_MS if inline else 10_000
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout}")
        if read_only:
            # A read session that wrote would upgrade its snapshot to a writer, which SQLite
            # may refuse at once (SQLITE_BUSY): refused here, always, so no such code ships.
            cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Take the write lock up front: a deferred transaction that reads and then writes can
        # fail with SQLITE_BUSY at once instead of waiting out busy_timeout. One hand-over to
        # the driver's thread, not SQLAlchemy's three (docs/adr/database.md).
        driver = connection.connection.driver_connection  # aiosqlite.Connection
        info = connection.connection.info  # the pooled connection's, kept across checkouts
        # Until the BEGIN has run, sqlite3 does not say a transaction is open; if the request
        # is cancelled meanwhile, the BEGIN still runs on the thread after it: _on_reset must
        # then roll it back (queued behind it), or the connection goes back holding the lock.
        info[_BEGIN_PENDING] = True
        await_(driver._execute(driver._conn.execute, begin))
        del info[_BEGIN_PENDING]

    @event.listens_for(engine.sync_engine, "reset")
    def _on_reset(dbapi_connection: Any, record: Any, state: PoolResetState) -> None:
        # In place of the pool's rollback on every return (pool_reset_on_return=None): only a
        # connection left in a transaction needs one, and sqlite3 knows without a hand-over.
        begin_pending = record is not None and record.info.pop(_BEGIN_PENDING, False)
        if state.terminate_only or not state.asyncio_safe:
            return  # garbage collection: no I/O possible, and the pool closes the connection
        if begin_pending or dbapi_connection.driver_connection.in_transaction:
            dbapi_connection.rollback()


def _replace_closed_connections(engine: AsyncEngine) -> None:
    """A pooled asyncpg connection the server has closed meanwhile (a restart, a failover, an
    administrator ending sessions) is replaced when it is checked out, instead of failing the
    request that gets it. asyncpg notices the close as it happens, so this costs no round trip
    (a pre-ping would cost one on every checkout)."""

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if dbapi_connection.driver_connection.is_closed():
            raise DisconnectionError("the server closed this connection while it was pooled")


# Run on every PostgreSQL connection Tucano opens: no JIT compilation, which short index lookups
# pay for and never gain from (docs/adr/database.md). A statement, since PgBouncer refuses it as
# a startup parameter.
POSTGRES_SESSION_SETUP = "SET jit = off"


async def _set_up_session(connection: Any) -> None:
    await connection.execute(POSTGRES_SESSION_SETUP)


# Connections of a process that only read, on SQLite: on threads of aiosqlite's, and inline
# (on the event loop's thread; a read session holds one across its awaits).
SQLITE_READ_CONNECTIONS = 4
SQLITE_INLINE_READ_CONNECTIONS = 16


def create_engine(
    database_url: str,
    *,
    pool_size: int = 10,
    autocommit: bool = False,
    read_only: bool = False,
    inline: bool = False,
) -> AsyncEngine:
    """An engine; on SQLite, `read_only` gives connections of their own for reads, and `inline`
    (with read_only) runs them on the event loop's thread (db/sqlite_inline.py)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        create_private_sqlite_file(database_url)
        # One writing connection per process: SQLite has one writer at a time anyway, and
        # queueing for the connection in asyncio is far cheaper than SQLite's busy handler,
        # which sleeps. Reads have connections of their own (read_only), which neither wait
        # for it nor take its lock.
        inline = inline and read_only
        extra: dict[str, Any] = {}
        if inline:
            args, options = SQLiteDialect_aiosqlite().create_connect_args(url)
            extra["async_creator"] = inline_connector(list(args), dict(options))
        engine = create_async_engine(
            url,
            hide_parameters=True,
            poolclass=FirstComePool,
            pool_size=(
                SQLITE_INLINE_READ_CONNECTIONS
                if inline
                else SQLITE_READ_CONNECTIONS
                if read_only
                else 1
            ),
            max_overflow=0,
            pool_timeout=120,
            pool_reset_on_return=None,  # see _on_reset
            **extra,
        )
        _configure_sqlite(engine, read_only=read_only, inline=inline)
        return engine
    engine = create_async_engine(
        url,
        poolclass=FirstComePool,
        pool_size=pool_size,
        # No overflow: a connection opened beyond the pool is closed again on return, and
        # under load that churn (connect, TLS probe, statement cache warm-up) cost more than
        # waiting a moment for a pooled connection.
        max_overflow=0,
        pool_timeout=30,
        pool_pre_ping=False,
        pool_recycle=1800,
        # SQL parameters never reach an error message or a log line.
        hide_parameters=True,
        **({"isolation_level": "AUTOCOMMIT"} if autocommit else {}),
    )
    _replace_closed_connections(engine)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.run_async(_set_up_session)

    return engine


async def _keep_session_state(_connection: Any) -> None:
    """The pool's reset: nothing beyond asyncpg's own (see Database.driver_connection). Nothing
    on these connections sets session state (no LISTEN, advisory lock or cursor) but the SET of
    POSTGRES_SESSION_SETUP when each opens, which must outlive its returns to the pool."""


async def create_asyncpg_pool(engine: AsyncEngine, *, size: int) -> Any:
    """An asyncpg pool on the database `engine` connects to, with the same connection options
    (those of the URL's query string, `ssl` for one, included)."""
    import asyncpg

    _, options = engine.dialect.create_connect_args(engine.url)
    # SQLAlchemy's own spelling of asyncpg's option; its other extras do not apply here.
    options["statement_cache_size"] = options.pop("prepared_statement_cache_size", 100)
    options.pop("prepared_statement_name_func", None)
    options.pop("async_creator_fn", None)
    return await asyncpg.create_pool(
        **options,
        min_size=0,
        max_size=size,
        init=_set_up_session,
        reset=_keep_session_state,
    )


async def connect_asyncpg(database_url: str, *, database: str | None = None) -> Any:
    """A plain asyncpg connection to the PostgreSQL server a `postgresql+asyncpg://` URL names
    (optionally to another database on it), for what SQLAlchemy does not do: LISTEN, and
    CREATE/DROP DATABASE in tests and benchmarks."""
    import asyncpg

    url = make_url(database_url)
    return await asyncpg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        database=database or url.database,
        ssl=url.query.get("ssl"),  # as SQLAlchemy passes it, so LISTEN connects as queries do
    )
