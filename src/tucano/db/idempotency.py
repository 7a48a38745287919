"""The idempotency store: the answer to a request, kept under the caller's key for a window, so
that a retry gets the first answer again instead of doing the work twice.

A key table has the columns (owner, key, request_hash, response, created_at), unique on
(owner, key); the owner column names whose keys they are (a customer, an API client). A key is
live for `window` after it was stored: the same request (its fingerprint) is answered as the
first time, another request is the owner's conflict. Once the window is over the key is
pruned, or taken over by the next request that brings it.

Each rule is one statement that SQLite and PostgreSQL both run, in the caller's session.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table, bindparam, delete, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession


class IdempotencyStore:
    """The keys kept in `table`, owned through its column `owner`. Its statements are built
    once, with their values bound per request, since building one costs more than running it."""

    def __init__(
        self,
        *,
        table: Table,
        owner: str,
        window: timedelta,
        conflict: Callable[[], Exception],
    ) -> None:
        self.table = table
        self.owner = owner
        self.window = window
        self.conflict = conflict  # raised when a live key comes with another request
        c = table.c
        owner_value = bindparam("owner", type_=c[owner].type)
        key = bindparam("key", type_=c.key.type)
        window_start = bindparam("window_start", type_=c.created_at.type)
        self._find = select(c.request_hash, c.response).where(
            c[owner] == owner_value, c.key == key, c.created_at > window_start
        )
        self._remember: dict[str, Any] = {}
        for dialect, insert in (("postgresql", postgresql.insert), ("sqlite", sqlite.insert)):
            statement = insert(table).values(
                {
                    owner: owner_value,
                    "key": key,
                    "request_hash": bindparam("fingerprint", type_=c.request_hash.type),
                    "response": bindparam("answer", type_=c.response.type),
                    "created_at": bindparam("now", type_=c.created_at.type),
                }
            )
            self._remember[dialect] = statement.on_conflict_do_update(
                index_elements=[c[owner], c.key],
                set_={
                    "request_hash": statement.excluded.request_hash,
                    "response": statement.excluded.response,
                    "created_at": statement.excluded.created_at,
                },
                where=c.created_at <= window_start,
            ).returning(c.key)

    def remember_statement(self, dialect: str) -> Any:
        """The INSERT that `remember` runs on `dialect` (values: owner, key, fingerprint, answer,
        now, window_start), RETURNING the key only when it went in: for a caller's own
        statement around it."""
        return self._remember[dialect]

    def replay(self, stored: Any, fingerprints: Collection[str]) -> bytes | None:
        """The answer to send again, from the (request_hash, response) row `find` read; None
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
        values = {"owner": owner, "key": key, "window_start": now - self.window}
        stored = (await session.execute(self._find, values)).first()
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
        """Keep `answer` for replays of this key, in the caller's transaction, unless a live
        key holds its place (an expired one is taken over). False when one does (a concurrent
        request with this key got there first): the caller then rolls back and replays that
        request's answer."""
        statement = self._remember[session.get_bind().dialect.name]
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
