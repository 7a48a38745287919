"""The Database of one process: a session for work that writes, a read session for work that
only reads, and callbacks run after a commit.

Services receive an `AsyncSession` and only `flush()`; whoever opened the session (a request, a
worker loop, a CLI command) commits it once, so two services can share one transaction. Every
statement goes through a feature's repository (db/repository.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session

from tucano.db.engines import create_engine

# The key under which a session's `info` names the Database it came from (db/postgres.py reads
# it to borrow a connection of the same pool).
DATABASE_KEY = "tucano.database"


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
    """The engines and sessions of one process.

    Sessions are let in first come, first served (an asyncio.Semaphore, which lets nobody
    overtake those waiting), one per pooled connection, writers and readers each in their own
    line, because a pool's own queue lets a newcomer take a connection just returned, and under
    load a few requests lost that race over and over.
    """

    def __init__(self, database_url: str, *, pool_size: int = 10) -> None:
        self.url = database_url
        self._engine = create_engine(database_url, pool_size=pool_size)
        self._read_engine = create_engine(database_url, pool_size=pool_size, read_only=True)
        self._sessions = async_sessionmaker(
            self._engine, expire_on_commit=False, sync_session_class=_Session
        )
        self._read_sessions = async_sessionmaker(
            self._read_engine, expire_on_commit=False, sync_session_class=_Session
        )
        # db/postgres.py's own, PostgreSQL only: its driver pool (opened on first use) and its
        # lookups that share statements, one per function.
        self._driver_pool: Any = None
        self._driver_line: asyncio.Semaphore | None = None
        self._lookups: dict[Callable[..., Any], Any] = {}
        self._writers = asyncio.Semaphore(self._engine.pool.size())  # type: ignore[attr-defined]
        self._readers = asyncio.Semaphore(self._read_engine.pool.size())  # type: ignore[attr-defined]

    @property
    def dialect(self) -> str:
        """ "sqlite" or "postgresql"."""
        return self._engine.dialect.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session for work that writes: rolled back unless the caller committed it."""
        async with self._writers, self._sessions() as session:
            session.info[DATABASE_KEY] = self
            try:
                yield session
            except BaseException:
                await session.rollback()
                raise

    @asynccontextmanager
    async def read_session(self) -> AsyncIterator[AsyncSession]:
        """A session for work that only reads: on SQLite a snapshot on a connection of its own
        that cannot write (it neither waits for a writer nor holds one up); on PostgreSQL in
        autocommit (each statement its own snapshot, no BEGIN or ROLLBACK)."""
        async with self._readers, self._read_sessions() as session:
            session.info[DATABASE_KEY] = self
            yield session

    async def dispose(self) -> None:
        if self._driver_pool is not None:
            pool, self._driver_pool = self._driver_pool, None
            await pool.close()
        await self._engine.dispose()
        await self._read_engine.dispose()
