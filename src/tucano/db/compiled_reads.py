"""The hottest SELECTs, compiled once and run straight on the driver's connection.

For a read that the database answers in microseconds, SQLAlchemy's pool, transaction and result
machinery cost more than the statement (docs/performance.md). A CompiledRead keeps SQLAlchemy
for what it is good at, writing the statement and converting values in and out by the columns'
types, and skips the rest: parameters are bound in the compiled order and each row is read into
a named tuple.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from sqlalchemy import Select
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine import Dialect


class CompiledRead(ABC):
    """A SELECT compiled for `dialect`, with its parameters' and columns' converters; run by
    `first` and `all` on the connection of Database.compiled_read_connection."""

    def __init__(self, statement: Select[Any], row: Callable[..., Any], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = compiled.string
        self._names = list(compiled.positiontup or [])
        # The statement's own values (literals SQLAlchemy binds, as in coalesce(x, 0)), for the
        # parameters a caller does not give.
        self._defaults = {
            name: value for name, value in compiled.params.items() if value is not None
        }
        binders: dict[str, Any] = dict(compiled._bind_processors)
        self._binders: list[Any] = [binders.get(name) for name in self._names]
        self._readers = [
            column.type._cached_result_processor(dialect, None)
            for column in statement.selected_columns
        ]
        self._row = row

    def _parameters(self, values: dict[str, Any]) -> list[Any]:
        given = [values[name] if name in values else self._defaults[name] for name in self._names]
        return [
            value if binder is None else binder(value)
            for value, binder in zip(given, self._binders, strict=True)
        ]

    def _read(self, found: Any) -> Any:
        return self._row(
            *(
                value if reader is None else reader(value)
                for value, reader in zip(found, self._readers, strict=True)
            )
        )

    @abstractmethod
    async def first(self, connection: Any, values: dict[str, Any]) -> Any | None:
        """The first row for `values`, or None."""

    @abstractmethod
    async def all(self, connection: Any, values: dict[str, Any]) -> list[Any]:
        """Every row for `values`."""


class CompiledSqliteRead(CompiledRead):
    """Run on an sqlite3 connection of the event loop's thread (db/sqlite_inline.py)."""

    def __init__(self, statement: Select[Any], row: Callable[..., Any]) -> None:
        super().__init__(statement, row, SQLiteDialect_aiosqlite())

    # (async, as the PostgreSQL one, though it never waits: a caller runs either the same way)
    async def first(self, connection: sqlite3.Connection, values: dict[str, Any]) -> Any | None:
        found = connection.execute(self.sql, self._parameters(values)).fetchone()
        return None if found is None else self._read(found)

    async def all(self, connection: sqlite3.Connection, values: dict[str, Any]) -> list[Any]:
        return [
            self._read(found) for found in connection.execute(self.sql, self._parameters(values))
        ]


class CompiledPostgresRead(CompiledRead):
    """Run on an asyncpg connection in autocommit: one statement, one snapshot, no BEGIN."""

    def __init__(self, statement: Select[Any], row: Callable[..., Any]) -> None:
        super().__init__(statement, row, PGDialect_asyncpg())  # type: ignore[no-untyped-call]

    async def first(self, connection: Any, values: dict[str, Any]) -> Any | None:
        found = await connection.fetchrow(self.sql, *self._parameters(values))
        return None if found is None else self._read(found)

    async def all(self, connection: Any, values: dict[str, Any]) -> list[Any]:
        rows = await connection.fetch(self.sql, *self._parameters(values))
        return [self._read(found) for found in rows]


def compiled_read(dialect: str, statement: Select[Any], row: Callable[..., Any]) -> CompiledRead:
    """`statement` compiled for the database named `dialect` ("sqlite" or "postgresql"), its
    rows read into `row`."""
    if dialect == "postgresql":
        return CompiledPostgresRead(statement, row)
    return CompiledSqliteRead(statement, row)
