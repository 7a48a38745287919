"""PostgreSQL's accelerators, for the few statements a benchmark shows are worth more than the
plain path (docs/performance.md, "Where PostgreSQL is tuned", names each and what it saves):

- a statement run straight on asyncpg's connection, in autocommit, one round trip, without
  SQLAlchemy's execution and result machinery (`driver_connection`, `read_connection`);
- a statement compiled once by SQLAlchemy for asyncpg, its values bound by name and its rows
  read back by the columns' own types, so that it is still written (and checked) as SQLAlchemy
  (`Compiled`);
- lookups by key that share one statement under load (db/coalesced.py, `coalesced`).

Only db/ and the repositories and queue back end that a benchmark names import this module (an
import-linter contract lists them).
"""

from __future__ import annotations

import asyncio
from collections import namedtuple
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from tucano.db.coalesced import CoalescedLookup
from tucano.db.database import Database
from tucano.db.engines import create_asyncpg_pool

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_DIALECT = PGDialect_asyncpg()  # type: ignore[no-untyped-call]
_POOL_OPENING = asyncio.Lock()


@asynccontextmanager
async def driver_connection(database: Database) -> AsyncIterator[asyncpg.Connection]:
    """An asyncpg connection in autocommit, from a pool of asyncpg's own beside the engines'
    (as large as each of theirs): borrowing from it skips SQLAlchemy's pool, its events and its
    rollback on return. In a line of its own, first come first served, as the sessions are
    (asyncpg's pool, like SQLAlchemy's, lets a newcomer take a connection just returned). A
    transaction left open on it (its caller cancelled mid-way) is rolled back by asyncpg when
    the connection returns to the pool."""
    pool = database._driver_pool or await _open_driver_pool(database)
    assert database._driver_line is not None
    async with database._driver_line, pool.acquire() as connection:
        yield connection


async def _open_driver_pool(database: Database) -> asyncpg.Pool:
    async with _POOL_OPENING:
        if database._driver_pool is None:  # db/'s own: Database keeps its pools to db/
            size = database._read_engine.pool.size()  # type: ignore[attr-defined]
            database._driver_line = asyncio.Semaphore(size)
            database._driver_pool = await create_asyncpg_pool(database._read_engine, size=size)
    pool: asyncpg.Pool = database._driver_pool
    return pool


async def read_connection(session: AsyncSession) -> asyncpg.Connection:
    """The asyncpg connection under a read session (in autocommit on PostgreSQL): its reads run
    there straight, on the connection the session already holds."""
    connection = await session.connection()
    pooled = await connection.get_raw_connection()
    driver: asyncpg.Connection = pooled.driver_connection
    return driver


class Compiled:
    """A statement compiled once for asyncpg. `all` and `first` run it with values by name and
    give rows whose fields are named after the selected columns, each read through its
    column's own type, as SQLAlchemy would read it."""

    def __init__(self, statement: ClauseElement) -> None:
        compiled = statement.compile(dialect=_DIALECT)
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        self._names = list(compiled.positiontup or [])
        binds = compiled.binds
        # The statement's own values (literals SQLAlchemy binds, as in coalesce(x, 0)).
        self._defaults = {
            name: bind.value for name, bind in binds.items() if bind.value is not None
        }
        self._binders = [binds[name].type.bind_processor(_DIALECT) for name in self._names]
        selected = getattr(statement, "selected_columns", None)
        columns = [] if selected is None else list(selected)
        names = [] if selected is None else list(selected.keys())
        self._row = namedtuple("Row", names, rename=True)  # type: ignore[misc]
        readers = [column.type.result_processor(_DIALECT, None) for column in columns]
        self._readers = [(index, read) for index, read in enumerate(readers) if read is not None]

    def _values(self, values: Mapping[str, Any]) -> list[Any]:
        given = [values[name] if name in values else self._defaults[name] for name in self._names]
        return [
            value if binder is None else binder(value)
            for value, binder in zip(given, self._binders, strict=True)
        ]

    def _read(self, record: Any) -> Any:
        values = list(record)
        for index, read in self._readers:
            values[index] = read(values[index])
        return self._row(*values)

    async def all(self, connection: asyncpg.Connection, values: Mapping[str, Any]) -> list[Any]:
        return [self._read(r) for r in await connection.fetch(self.sql, *self._values(values))]

    async def first(self, connection: asyncpg.Connection, values: Mapping[str, Any]) -> Any:
        record = await connection.fetchrow(self.sql, *self._values(values))
        return None if record is None else self._read(record)


async def coalesced(
    database: Database,
    fetch_many: Callable[[asyncpg.Connection, list[K]], Awaitable[Mapping[K, V]]],
    key: K,
) -> V | None:
    """The value of `key` by `fetch_many(connection, keys)`, which lookups that arrive together
    share (db/coalesced.py): each statement runs on a connection of its own, and starts after
    every lookup it answers was asked for. Two statements at a time: enough to keep the
    database busy, few enough that lookups under load go in batches."""
    # One lookup per database and function, so that every request's lookups share statements.
    lookup = database._lookups.get(fetch_many)
    if lookup is None:

        async def fetch(keys: list[K]) -> Mapping[K, V]:
            async with driver_connection(database) as connection:
                return await fetch_many(connection, keys)

        lookup = database._lookups[fetch_many] = CoalescedLookup(fetch, max_in_flight=2)
    return await lookup.get(key)
