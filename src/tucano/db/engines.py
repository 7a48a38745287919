"""Engines per database: SQLite's set-up (one writer, readers of their own), PostgreSQL's pool."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tucano.brazil.brasilia_time import brasilia_day_of_text

# The SQLite database holds sealed secrets and the sandbox's key: its owner's alone. SQLite
# gives its -wal and -shm files the database file's mode.
SQLITE_FILE_MODE = 0o600
# Connections of a process that only read, on SQLite (each on a thread of aiosqlite's).
SQLITE_READ_CONNECTIONS = 4
# How long a statement waits for another connection's write lock on SQLite.
SQLITE_BUSY_TIMEOUT_MS = 10_000
# SQLite has no time-zone database: brasilia_day(timestamp) is Python's, on every connection.
SQLITE_BRASILIA_DAY = "brasilia_day"


def add_sqlite_functions(dbapi_connection: Any) -> None:
    """The SQL functions Tucano's statements call that SQLite lacks."""
    dbapi_connection.create_function(
        SQLITE_BRASILIA_DAY, 1, brasilia_day_of_text, deterministic=True
    )


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


def _configure_sqlite(engine: AsyncEngine, *, read_only: bool) -> None:
    """WAL, foreign keys and a busy timeout on every connection; SQLAlchemy, not the driver,
    starts transactions: writers with BEGIN IMMEDIATE (the write lock up front, so a transaction
    that reads and then writes never fails at once with SQLITE_BUSY), readers with a plain
    BEGIN (a snapshot that neither waits for a writer nor holds one up). This is the recipe of
    SQLAlchemy's SQLite documentation ("Serializable isolation / Savepoints")."""
    begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        if read_only:
            # A read session that wrote would upgrade its snapshot to a writer, which SQLite
            # may refuse at once (SQLITE_BUSY): refused here, always, so no such code ships.
            cursor.execute("PRAGMA query_only=ON")
        cursor.close()
        add_sqlite_functions(dbapi_connection)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql(begin)


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


def create_engine(
    database_url: str, *, pool_size: int = 10, read_only: bool = False
) -> AsyncEngine:
    """An engine. On SQLite, one writing connection (SQLite has one writer at a time, and
    waiting for the connection in asyncio is far cheaper than SQLite's busy handler, which
    sleeps), or with `read_only` a few connections of their own for reads. On PostgreSQL,
    `read_only` runs each statement in autocommit: under READ COMMITTED every statement has its
    own snapshot anyway, and no BEGIN and ROLLBACK save two round trips per request."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        create_private_sqlite_file(database_url)
        engine = create_async_engine(
            url,
            hide_parameters=True,
            pool_size=SQLITE_READ_CONNECTIONS if read_only else 1,
            max_overflow=0,
            pool_timeout=120,
        )
        _configure_sqlite(engine, read_only=read_only)
        return engine
    engine = create_async_engine(
        url,
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
        **({"isolation_level": "AUTOCOMMIT"} if read_only else {}),
    )
    _replace_closed_connections(engine)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.run_async(_set_up_session)

    return engine


async def _set_up_session(connection: Any) -> None:
    await connection.execute(POSTGRES_SESSION_SETUP)


async def create_asyncpg_pool(engine: AsyncEngine, *, size: int) -> Any:
    """An asyncpg pool on the database `engine` connects to, with the same connection options
    (the URL's query string, `ssl` for one, included) and the same session set-up."""
    import asyncpg

    _, options = engine.dialect.create_connect_args(engine.url)
    # SQLAlchemy's spelling of asyncpg's statement cache option; its other extras do not apply.
    options["statement_cache_size"] = options.pop("prepared_statement_cache_size", 100)
    options.pop("prepared_statement_name_func", None)
    options.pop("async_creator_fn", None)
    return await asyncpg.create_pool(
        **options, min_size=0, max_size=size, init=_set_up_session, reset=_keep_session
    )


async def _keep_session(connection: Any) -> None:
    """Nothing to reset between borrowers: each statement runs in autocommit, and asyncpg's
    default reset (RESET ALL and more, a round trip) would also undo the session's set-up."""


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
