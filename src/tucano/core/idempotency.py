"""The idempotency store: the answer to a request, kept under the caller's key for a window, so
that a retry gets the first answer again instead of doing the work twice.

A key table has the columns (owner, key, request_hash, response, created_at), unique on
(owner, key); the owner column names whose keys they are (a customer, an API client). A key is
live for `window` after it was stored: the same request (its fingerprint) is answered as the
first time, another request is the owner's conflict. Once the window is over the key is
pruned, or taken over by the next request that brings it.

Each rule is one statement text that SQLite and PostgreSQL both run, through a session or, with
`$n` placeholders, inside a caller's own asyncpg statement.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table, TextClause, bindparam, delete, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession


@dataclass(frozen=True)
class IdempotencyStore:
    """The keys kept in `table`, owned through its column `owner`."""

    table: Table
    owner: str
    window: timedelta
    # Raised when a live key comes with another request.
    conflict: Callable[[], Exception]

    def find_sql(
        self, *, owner: str = ":owner", key: str = ":key", window_start: str = ":window_start"
    ) -> str:
        """SELECT the fingerprint and answer of the key if it is live (newer than window_start)."""
        return (
            f"SELECT request_hash, response FROM {self.table.name}"  # noqa: S608 - our own names
            f" WHERE {self.owner} = {owner} AND key = {key} AND created_at > {window_start}"
        )

    def remember_sql(
        self,
        *,
        owner: str = ":owner",
        key: str = ":key",
        fingerprint: str = ":fingerprint",
        answer: str = ":answer",
        now: str = ":now",
        window_start: str = ":window_start",
    ) -> str:
        """INSERT the key and its answer unless a live key holds its place (an expired one is
        taken over); RETURNING a row only when it went in."""
        return f"""INSERT INTO {self.table.name} AS k
    ({self.owner}, key, request_hash, response, created_at)
VALUES ({owner}, {key}, {fingerprint}, {answer}, {now})
ON CONFLICT ({self.owner}, key) DO UPDATE
   SET request_hash = excluded.request_hash, response = excluded.response,
       created_at = excluded.created_at
 WHERE k.created_at <= {window_start}
RETURNING 1"""  # noqa: S608 - our own names

    def replay(self, stored: Any, fingerprints: Collection[str]) -> bytes | None:
        """The answer to send again, from the (request_hash, response) row find_sql read; None
        for no row (a new key); the conflict when the key came with another request."""
        if stored is None:
            return None
        request_hash, response = stored
        if request_hash not in fingerprints:
            raise self.conflict()
        return str(response).encode()

    async def find(
        self,
        session: AsyncSession,
        *,
        owner: Any,
        key: Any,
        fingerprints: Collection[str],
        now: datetime,
    ) -> bytes | None:
        """The answer kept for this key if it is live and came with one of `fingerprints` (the
        spellings of this request); None if the key is new; the conflict otherwise."""
        statement = self._statement(self.find_sql(), "owner", "key", "window_start")
        values = {"owner": owner, "key": key, "window_start": now - self.window}
        stored = (await session.execute(statement, values)).first()
        return self.replay(stored, fingerprints)

    async def remember(
        self,
        session: AsyncSession,
        *,
        owner: Any,
        key: Any,
        fingerprint: str,
        answer: bytes,
        now: datetime,
    ) -> bool:
        """Keep `answer` for replays of this key, in the caller's transaction. False when a live
        key holds its place (a concurrent request with this key got there first): the caller
        then rolls back and replays that request's answer."""
        statement = self._statement(
            self.remember_sql(), "owner", "key", "fingerprint", "answer", "now", "window_start"
        )
        values = {
            "owner": owner,
            "key": key,
            "fingerprint": fingerprint,
            "answer": answer.decode(),
            "now": now,
            "window_start": now - self.window,
        }
        return (await session.execute(statement, values)).first() is not None

    async def prune(self, session: AsyncSession, *, now: datetime, batch_size: int = 5000) -> int:
        """Delete one batch of the oldest expired keys and say how many; the runner calls again
        while there are more (one DELETE of them all would hold SQLite's write lock too long)."""
        columns = self.table.c
        owner, key, created_at = columns[self.owner], columns.key, columns.created_at
        expired = (
            select(owner, key)
            .where(created_at <= now - self.window)
            .order_by(created_at)
            .limit(batch_size)
        )
        result = await session.execute(delete(self.table).where(tuple_(owner, key).in_(expired)))
        return int(getattr(result, "rowcount", 0) or 0)

    def _statement(self, sql: str, *names: str) -> TextClause:
        """`sql` with its parameters typed as the table's columns (timestamps and UUIDs are
        stored differently on each database)."""
        columns = self.table.c
        types = {
            "owner": columns[self.owner].type,
            "key": columns.key.type,
            "fingerprint": columns.request_hash.type,
            "answer": columns.response.type,
            "now": columns.created_at.type,
            "window_start": columns.created_at.type,
        }
        return text(sql).bindparams(*(bindparam(name, type_=types[name]) for name in names))
