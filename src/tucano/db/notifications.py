"""Notifications between processes on one database: PostgreSQL's NOTIFY, sent in a transaction
(and so delivered only once it commits), and a LISTEN connection that relays them. SQLite has
none: there, processes find each other's work by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import asyncpg
import structlog
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.db.engines import connect_asyncpg

log = structlog.get_logger("tucano.db")

_NOTIFY = text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) AS p")


async def notify(session: AsyncSession, channel: str, payloads: Sequence[str] = ("",)) -> None:
    """Send `payloads` on `channel` to every listening process once the session's transaction
    commits (nothing on SQLite). PostgreSQL folds repeats within one transaction into one; one
    statement however many payloads, as one per payload is slow for thousands."""
    if payloads and session.get_bind().dialect.name == "postgresql":
        await session.execute(_NOTIFY, {"channel": channel, "payloads": list(payloads)})


class ListenerOutage:
    """The listener's log while it cannot connect: a line when it goes down, then one a minute
    (it tries every second), and one when it is back."""

    def __init__(self) -> None:
        self.failures = 0
        self.logged_at = 0.0

    def failed(self, error: str) -> bool:
        """Count a failure; True for the first since the listener last worked."""
        self.failures += 1
        now = time.monotonic()
        if self.failures == 1 or now - self.logged_at >= 60:
            self.logged_at = now
            log.warning("notification_listener_down", error=error, failuresInARow=self.failures)
        return self.failures == 1

    def over(self) -> None:
        if self.failures:
            log.info("notification_listener_resumed", failuresInARow=self.failures)
        self.failures = 0


async def _wait_for_either(first: asyncio.Event, second: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def listen(
    database_url: str,
    channels: Mapping[str, Callable[[str], None]],
    stop: asyncio.Event,
    *,
    on_listening: Callable[[bool], None],
    on_lost: Callable[[], None],
    probe_every: float = 5.0,
) -> None:
    """Call `channels[channel](payload)` for each notification until `stop`, reconnecting
    whenever the connection is lost; returns at once on SQLite. `on_listening(again)` runs each
    time the listener (re)connects (`again`: it had listened before, so notifications may have
    been missed), `on_lost` as soon as a connection it listened on is lost. A connection that a
    NAT or firewall dropped without a word looks open for hours (TCP keepalive starts after
    two): a `SELECT 1` every `probe_every` seconds, answered within as long, finds it out."""
    if make_url(database_url).get_backend_name() != "postgresql":
        return
    listened_before = False
    down = ListenerOutage()
    while not stop.is_set():
        connection: Any = None
        try:
            opened = await asyncio.wait_for(connect_asyncpg(database_url), probe_every)
            connection = opened
            # A connection the server ended (an administrator, a restart) says so at once.
            lost = asyncio.Event()
            opened.add_termination_listener(lambda _closed, lost=lost: lost.set())
            for channel, relay in channels.items():
                await opened.add_listener(
                    channel, lambda _c, _p, _ch, payload, relay=relay: relay(payload)
                )
            on_listening(listened_before)
            listened_before = True
            while not stop.is_set() and not lost.is_set() and not opened.is_closed():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(probe_every):
                        await _wait_for_either(stop, lost)
                if not stop.is_set() and not lost.is_set():
                    await asyncio.wait_for(opened.fetchval("SELECT 1"), timeout=probe_every)
                    down.over()  # back for good: it has answered a probe
            if not stop.is_set():
                raise ConnectionResetError("the server ended the connection")
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if down.failed(type(exc).__name__) and listened_before:  # once per outage
                on_lost()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1)
        finally:
            if connection is not None and stop.is_set():
                with contextlib.suppress(Exception):
                    await connection.close(timeout=2)
            elif connection is not None:  # dropped or failing: no goodbye to wait for
                connection.terminate()
