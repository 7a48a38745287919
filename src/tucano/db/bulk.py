"""Bulk helpers for the hot paths: IN lists in parts, one driver-level executemany."""

from __future__ import annotations

from collections.abc import (
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import (
    AsyncSession,
)

T = TypeVar("T")
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
