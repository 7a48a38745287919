"""One process at a time for work only one should do (the NATS queue's relay): a PostgreSQL
session advisory lock, held on a connection of its own. A process that dies lets go at once, as
its connection closes, and a standby takes over at its next try. SQLite serves one process, so
there it always leads."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import asyncpg
import structlog
from sqlalchemy.engine import make_url

from tucano.db.engines import connect_asyncpg

log = structlog.get_logger("tucano.db")

# A connection that does not answer within this long is taken as lost.
ANSWER_SECONDS = 5.0
# The leader checks its connection this often, so that a lost one stops it within as long.
PROBE_SECONDS = 5.0

_LOST = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


class Leadership:
    """Whether this process leads `key`'s work. The leader's connection is named `<name> <pid>`
    (pg_stat_activity's application_name), so an operator sees which process it is."""

    def __init__(
        self, database_url: str, *, key: int, name: str, probe_seconds: float = PROBE_SECONDS
    ) -> None:
        self.database_url = database_url
        self.key = key
        self.name = name
        self.probe_seconds = probe_seconds
        self.postgres = make_url(database_url).get_backend_name() == "postgresql"
        self._connection: Any = None
        self._leading = False
        self._probed_at = 0.0

    async def lead(self) -> bool:
        """Try to lead (or check that this process still does): True while it does. A lost
        connection is False, and the next call connects again."""
        if not self.postgres:
            return True
        loop = asyncio.get_running_loop()
        try:
            if self._connection is None:
                self._connection = await asyncio.wait_for(
                    connect_asyncpg(self.database_url), ANSWER_SECONDS
                )
            if self._leading:
                if loop.time() - self._probed_at >= self.probe_seconds:
                    await asyncio.wait_for(self._connection.fetchval("SELECT 1"), ANSWER_SECONDS)
                    self._probed_at = loop.time()
                return True
            self._leading = bool(
                await asyncio.wait_for(
                    self._connection.fetchval("SELECT pg_try_advisory_lock($1)", self.key),
                    ANSWER_SECONDS,
                )
            )
            if self._leading:
                self._probed_at = loop.time()
                await self._connection.execute(
                    "SELECT set_config('application_name', $1, false)", f"{self.name} {os.getpid()}"
                )
            return self._leading
        except _LOST as exc:
            if self._leading:
                log.warning("leadership_lost", name=self.name, error=type(exc).__name__)
            self._forget()
            return False

    async def step_down(self) -> None:
        """Let go, so that a standby takes over at its next try."""
        if self._connection is not None:
            with contextlib.suppress(*_LOST):
                await asyncio.wait_for(self._connection.close(), ANSWER_SECONDS)
        self._forget()

    def _forget(self) -> None:
        if self._connection is not None:
            self._connection.terminate()  # no goodbye to wait for on a lost connection
        self._connection = None
        self._leading = False
