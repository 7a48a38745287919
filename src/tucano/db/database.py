"""The Database of one process: its engines, sessions and after-commit callbacks.

Services receive an `AsyncSession` and only `flush()`; whoever opened the session (a request, a
worker loop, a CLI command) commits it once, so two services can share one transaction.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Mapping,
)
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.ext.asyncio import (
    AsyncSession,
    async_sessionmaker,
)
from sqlalchemy.orm import Session

from tucano.db.coalesced import CoalescedLookup
from tucano.db.engines import create_asyncpg_pool, create_engine
from tucano.db.sqlite_handover import run_on_sqlite
from tucano.db.sqlite_inline import open_inline_reader

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


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
        # that a writer, in this process or another, does not hold them up; a request's reads
        # on the event loop's thread (db/sqlite_inline.py), reads of whole tables (exports) on
        # aiosqlite's threads, so that they do not hold the loop up.
        if self.engine.dialect.name == "postgresql":
            self.read_engine = create_engine(database_url, pool_size=pool_size, autocommit=True)
            self.bulk_read_engine = self.read_engine
        else:
            self.read_engine = create_engine(database_url, read_only=True, inline=True)
            self.bulk_read_engine = create_engine(database_url, read_only=True)
        self.read_sessionmaker = async_sessionmaker(
            self.read_engine, expire_on_commit=False, sync_session_class=_Session
        )
        self.bulk_read_sessionmaker = async_sessionmaker(
            self.bulk_read_engine, expire_on_commit=False, sync_session_class=_Session
        )
        self._pool_size = pool_size
        self._driver_pool: Any = None  # asyncpg.Pool, opened on first use (PostgreSQL only)
        self._driver_pool_opening = asyncio.Lock()
        self._lookups: dict[Callable[..., Any], CoalescedLookup[Any, Any]] = {}
        self._inline_sqlite: sqlite3.Connection | None = None

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

    def inline_sqlite(self) -> sqlite3.Connection:
        """SQLite only: this process's read-only sqlite3 connection on the event loop's thread,
        for compiled reads (opened on first use)."""
        if self._inline_sqlite is None:
            args, options = SQLiteDialect_aiosqlite().create_connect_args(self.engine.url)
            self._inline_sqlite = open_inline_reader(list(args), dict(options))
        return self._inline_sqlite

    @asynccontextmanager
    async def compiled_read_connection(self) -> AsyncIterator[Any]:
        """The driver's connection a CompiledRead runs on (db/compiled_reads.py): on SQLite the
        event loop's read connection; on PostgreSQL the asyncpg connection under one of the
        read engine's (autocommit, handed out first come first served)."""
        if self.dialect == "sqlite":
            yield self.inline_sqlite()
            return
        async with self.read_engine.connect() as connection:
            # (A statement given up part-way is cancelled by asyncpg, and the connection's next
            # statement waits for that: a test shows it.)
            pooled = await connection.get_raw_connection()
            yield pooled.driver_connection

    @asynccontextmanager
    async def bulk_read_session(self) -> AsyncIterator[AsyncSession]:
        """A session for reads that may take long (a whole export): off the event loop's
        thread on SQLite; the same as read_session on PostgreSQL."""
        async with self.bulk_read_sessionmaker() as session:
            yield session

    @asynccontextmanager
    async def driver_connection(self) -> AsyncIterator[Any]:
        """PostgreSQL only: an asyncpg connection in autocommit, for the hot statements (the
        delivery queue's, a payment link's create and read). Each of those is written as one
        statement, atomic by itself, so it needs no BEGIN/COMMIT around it, and asyncpg reads
        its rows without SQLAlchemy's per-row machinery.

        They come from asyncpg's own pool, with only its built-in reset: the cheapest way to
        borrow a connection (docs/adr/database.md)."""
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
        if self._inline_sqlite is not None:
            connection, self._inline_sqlite = self._inline_sqlite, None
            connection.close()
        await self.engine.dispose()
        for engine in {self.read_engine, self.bulk_read_engine} - {self.engine}:
            await engine.dispose()
