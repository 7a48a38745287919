"""Database core: the declarative Base, the UTC column type, the engine and its sessions.

Services receive an `AsyncSession` and only `flush()`; whoever opened the session (a request, a
worker loop, a CLI command) commits it once, so two services can share one transaction.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Depends, Request
from sqlalchemy import BigInteger, DateTime, Integer, MetaData, Table, event
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.pool import PoolResetState
from sqlalchemy.types import TypeDecorator
from sqlalchemy.util import await_

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# BIGINT on PostgreSQL; INTEGER on SQLite, where only that spelling is the autoincrementing rowid.
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")
# The last of __table_args__ of every table with a BigIntPK id: on SQLite, AUTOINCREMENT, so that
# an id is never handed out again after its row is deleted (PostgreSQL's sequences never do).
NEVER_REUSED_IDS: dict[str, Any] = {"sqlite_autoincrement": True}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# SQLite keeps a timestamp as text, and compares it as text. SQLAlchemy's statements write it as
# "YYYY-MM-DD HH:MM:SS.ffffff"; the hot paths that hand naive UTC datetimes to the driver
# themselves (the outbox, claims, results) got Python's default adapter, which drops ".000000"
# at a whole second, and such a row then sorted before the same instant written by a statement.
# One format for both (and Python 3.12 deprecates the default adapter anyway).
def sqlite_time_text(moment: datetime) -> str:
    """A (naive UTC) time as SQLite keeps it: text that sorts as the times do."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


sqlite3.register_adapter(datetime, sqlite_time_text)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that always comes back timezone-aware in UTC, on SQLite as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use tucano.clock")
        value = value.astimezone(UTC)
        # SQLite keeps text; store naive UTC so that string comparison orders correctly.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_BEGIN_PENDING = "tucano_begin_pending"


def _configure_sqlite(engine: AsyncEngine, *, read_only: bool = False) -> None:
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
        cursor.execute("PRAGMA busy_timeout=10000")
        if read_only:
            # A read session that wrote would upgrade its snapshot to a writer, which SQLite
            # may refuse at once (SQLITE_BUSY): refused here, always, so no such code ships.
            cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Take the write lock up front: a deferred transaction that reads and then writes can
        # fail with SQLITE_BUSY at once instead of waiting out busy_timeout. Sent in one
        # hand-over to the driver's thread: as a statement through SQLAlchemy it is three
        # (cursor, execute, close), each about 45 us of CPU.
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


# Run on every PostgreSQL connection Tucano opens: no JIT compilation. Its statements are short
# index lookups, but where the planner cannot see a bound (a LIMIT computed in the statement, a
# batch of keys) its estimate crosses jit_above_cost and each execution paid 35-70 ms of
# compilation (a claim of 128 deliveries with 300,000 queued: 50 ms, 5 ms without JIT; a fold
# of the result counts: 1.35 s, 0.17 s without). A statement rather than a startup parameter,
# which PgBouncer refuses ("unsupported startup parameter").
POSTGRES_SESSION_SETUP = "SET jit = off"


async def _set_up_session(connection: Any) -> None:
    await connection.execute(POSTGRES_SESSION_SETUP)


# Connections of a process that only read, on SQLite (each is a thread of aiosqlite's).
SQLITE_READ_CONNECTIONS = 4


def create_engine(
    database_url: str, *, pool_size: int = 10, autocommit: bool = False, read_only: bool = False
) -> AsyncEngine:
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        # One writing connection per process: SQLite has one writer at a time anyway, and
        # queueing for the connection in asyncio is far cheaper than SQLite's busy handler,
        # which sleeps. Reads have connections of their own (read_only), which neither wait
        # for it nor take its lock.
        engine = create_async_engine(
            url,
            hide_parameters=True,
            pool_size=SQLITE_READ_CONNECTIONS if read_only else 1,
            max_overflow=0,
            pool_timeout=120,
            pool_reset_on_return=None,  # see _on_reset
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
        **({"isolation_level": "AUTOCOMMIT"} if autocommit else {}),
    )
    _replace_closed_connections(engine)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.run_async(_set_up_session)

    return engine


# Values bound in one statement's IN list, at most: asyncpg refuses a statement with more than
# 32,767 parameters, and a list of ids that long (a webhook's whole backlog, say) comes in parts.
IDS_PER_STATEMENT = 10_000


def in_parts(items: Sequence[T], size: int = IDS_PER_STATEMENT) -> Iterator[Sequence[T]]:
    """`items` in consecutive parts of at most `size`, for IN lists (see IDS_PER_STATEMENT)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def insert_many(
    session: AsyncSession, table: Table, rows: Sequence[Mapping[str, Any]]
) -> None:
    """INSERT rows with one driver-level executemany, for the hot paths (the outbox, delivery
    results): SQLAlchemy's per-row parameter machinery costs more than SQLite itself there.
    Values still go through each column type's bind processor (UTC timestamps included)."""
    if not rows:
        return
    dialect = session.get_bind().dialect
    columns = list(rows[0])
    processors = [table.c[name].type.bind_processor(dialect) for name in columns]
    if dialect.paramstyle == "qmark":
        marks = ", ".join("?" for _ in columns)
    else:  # asyncpg: numeric_dollar
        marks = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608 - our own names
    params = [
        tuple(
            process(row[name]) if process else row[name]
            for name, process in zip(columns, processors, strict=True)
        )
        for row in rows
    ]
    connection = await session.connection()
    await connection.exec_driver_sql(sql, params)


class _Session(Session):
    """The sync session under every AsyncSession: runs `call_after_commit` callbacks."""


@event.listens_for(_Session, "after_commit")
def _run_after_commit(session: Session) -> None:
    for callback in session.info.pop("after_commit", {}).values():
        callback()


@event.listens_for(_Session, "after_rollback")
def _forget_after_commit(session: Session) -> None:
    session.info.pop("after_commit", None)


def call_after_commit(session: AsyncSession, key: str, callback: Callable[[], None]) -> None:
    """Run `callback` once the session's transaction commits (not if it rolls back); one
    callback per key and transaction, however often it is asked for."""
    session.info.setdefault("after_commit", {})[key] = callback


class Database:
    """The engine and session factory of one process."""

    def __init__(self, database_url: str, *, pool_size: int = 10) -> None:
        self.url = database_url
        self.engine = create_engine(database_url, pool_size=pool_size)
        self.sessionmaker = async_sessionmaker(
            self.engine, expire_on_commit=False, sync_session_class=_Session
        )
        # Reads on PostgreSQL run without BEGIN/ROLLBACK: under READ COMMITTED every statement
        # has its own snapshot anyway, and this saves two round trips per request. On SQLite
        # they run in deferred transactions (one snapshot each) on connections of their own, so
        # that a writer, in this process or another, does not hold them up.
        self.read_engine = (
            create_engine(database_url, pool_size=pool_size, autocommit=True)
            if self.engine.dialect.name == "postgresql"
            else create_engine(database_url, read_only=True)
        )
        self.read_sessionmaker = async_sessionmaker(
            self.read_engine, expire_on_commit=False, sync_session_class=_Session
        )
        self._pool_size = pool_size
        self._driver_pool: Any = None  # asyncpg.Pool, opened on first use (PostgreSQL only)
        self._driver_pool_opening = asyncio.Lock()
        self._lookups: dict[Callable[..., Any], CoalescedLookup[Any, Any]] = {}

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session that is rolled back unless the caller committed it."""
        async with self.sessionmaker() as session:
            try:
                yield session
            except BaseException:
                await session.rollback()
                raise

    @asynccontextmanager
    async def read_session(self) -> AsyncIterator[AsyncSession]:
        """A session for requests that only read (see read_sessionmaker)."""
        async with self.read_sessionmaker() as session:
            yield session

    @asynccontextmanager
    async def driver_connection(self) -> AsyncIterator[Any]:
        """PostgreSQL only: an asyncpg connection in autocommit, for the hot statements (the
        delivery queue's, a payment link's create and read). Each of those is written as one
        statement, atomic by itself, so it needs no BEGIN/COMMIT around it, and asyncpg reads
        its rows without SQLAlchemy's per-row machinery.

        They come from asyncpg's own pool rather than SQLAlchemy's: measured on this path,
        borrowing through SQLAlchemy's pool cost about 150 us of CPU per statement, asyncpg's
        pool with its default reset (a round trip on every return) about 80 us, and asyncpg's
        pool with only its built-in reset (a ROLLBACK only if a transaction was left open,
        listeners dropped) about 30 us."""
        pool = self._driver_pool or await self._open_driver_pool()
        async with pool.acquire() as connection:
            yield connection

    def coalesced(
        self, fetch_many: Callable[[Database, list[K]], Awaitable[Mapping[K, V]]]
    ) -> CoalescedLookup[K, V]:
        """This process's CoalescedLookup over `fetch_many(self, keys)`: one per function, so
        every request's lookups share its statements. Two statements at a time: enough to keep
        the database busy, few enough that lookups under load go in batches."""
        lookup = self._lookups.get(fetch_many)
        if lookup is None:
            lookup = self._lookups[fetch_many] = CoalescedLookup(
                lambda keys: fetch_many(self, keys), max_in_flight=2
            )
        return lookup

    async def _open_driver_pool(self) -> Any:
        async with self._driver_pool_opening:
            if self._driver_pool is None:
                self._driver_pool = await create_asyncpg_pool(
                    self.read_engine, size=self._pool_size
                )
        return self._driver_pool

    async def run_on_sqlite(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """SQLite only: `work` with this process's connection, on its thread, outside any
        transaction (`work` opens its own: see immediate_transaction)."""
        async with self.engine.connect() as connection:
            return await run_on_sqlite(connection, work)

    async def dispose(self) -> None:
        if self._driver_pool is not None:
            pool, self._driver_pool = self._driver_pool, None
            await pool.close()
        await self.engine.dispose()
        if self.read_engine is not self.engine:
            await self.read_engine.dispose()


class CoalescedLookup(Generic[K, V]):
    """Point lookups by key that share statements under load: while `max_in_flight` statements
    run, the keys asked for meanwhile wait and go together in the next one (at most `max_batch`
    keys). A lone lookup runs at once, as a statement of its own.

    Every statement starts after each of its lookups was asked for, so an answer is never older
    than its request: it sees every write committed before the request came. What this saves is
    the per-statement cost in this process (borrowing a connection, the protocol, the task
    switches), the largest part of a read's CPU beyond the route itself.
    """

    def __init__(
        self,
        fetch_many: Callable[[list[K]], Awaitable[Mapping[K, V]]],
        *,
        max_in_flight: int,
        max_batch: int = 64,
    ) -> None:
        self._fetch_many = fetch_many
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._in_flight = 0
        self._waiting: list[tuple[K, asyncio.Future[V | None]]] = []
        self._batches: set[asyncio.Task[None]] = set()  # a reference, so none is collected

    async def get(self, key: K) -> V | None:
        """The value of `key`, or None if there is none."""
        if self._in_flight < self._max_in_flight and not self._waiting:
            self._in_flight += 1
            try:
                return (await self._fetch_many([key])).get(key)
            finally:
                self._in_flight -= 1
                self._start_waiting()
        future: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, future))
        return await future

    def _start_waiting(self) -> None:
        while self._waiting and self._in_flight < self._max_in_flight:
            batch = self._waiting[: self._max_batch]
            del self._waiting[: self._max_batch]
            self._in_flight += 1
            # A context of its own: not the one of whichever request's lookup ended last.
            task = asyncio.get_running_loop().create_task(
                self._run(batch), context=contextvars.Context()
            )
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    async def _run(self, batch: list[tuple[K, asyncio.Future[V | None]]]) -> None:
        try:
            # Those whose request went away (the client left) are not asked for.
            keys = list(dict.fromkeys(key for key, future in batch if not future.done()))
            found = await self._fetch_many(keys) if keys else {}
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    if isinstance(exc, asyncio.CancelledError):
                        future.cancel()
                    else:
                        future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for key, future in batch:
                if not future.done():
                    future.set_result(found.get(key))
        finally:
            self._in_flight -= 1
            self._start_waiting()


async def run_on_sqlite(connection: AsyncConnection, work: Callable[[sqlite3.Connection], T]) -> T:
    """SQLite only: `work(sqlite3 connection)` on the thread aiosqlite keeps for the connection
    under `connection`, as one hand-over, inside whatever transaction `connection` has open.

    For the hot paths (the outbox, the delivery queue). Through SQLAlchemy every statement is
    several hand-overs between the event loop and that thread (cursor, execute, fetch, close),
    about 45 us of CPU each, plus SQLAlchemy's own work: a claim took 20 of them and about 3 ms
    of CPU, and the same statements run in one hand-over. SQLite itself answers in microseconds.
    The caller holds `connection`, so nothing else uses the sqlite3 connection meanwhile.
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


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One session per request; the endpoint commits what it writes, the rest is rolled back."""
    database: Database = request.app.state.database
    async with database.session() as session:
        yield session


async def get_read_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One session per read-only request (autocommit on PostgreSQL)."""
    database: Database = request.app.state.database
    async with database.read_session() as session:
        yield session


# scope="function": the session closes when the endpoint returns, before the response is sent.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session, scope="function")]


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
