"""Waking delivery workers the moment deliveries are committed, instead of at the next poll.

In-process: `publish_event` registers `wakeup.notify` to run after its transaction commits.
Across processes on PostgreSQL: the same transaction runs `pg_notify`, and every worker keeps one
connection LISTENing. Workers still poll (TUCANO_DELIVERY_POLL_INTERVAL_SECONDS) for retries that
come due and for other processes on SQLite, which has no notifications.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import structlog

from tucano.db import connect_asyncpg

NOTIFY_CHANNEL = "tucano_deliveries"

log = structlog.get_logger("tucano.deliveries")


class Wakeup:
    """A broadcast: `notify()` wakes every current waiter (several workers may share a process)."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Event] = set()

    def notify(self) -> None:
        for waiter in self._waiters:
            waiter.set()

    def waiter(self) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.add(event)
        return event

    def forget(self, event: asyncio.Event) -> None:
        self._waiters.discard(event)


wakeup = Wakeup()


async def listen_for_notifications(database_url: str, stop: asyncio.Event) -> None:
    """Relay PostgreSQL notifications on NOTIFY_CHANNEL to `wakeup`, reconnecting until `stop`."""
    while not stop.is_set():
        connection: asyncpg.Connection | None = None
        try:
            connection = await connect_asyncpg(database_url)
            await connection.add_listener(NOTIFY_CHANNEL, lambda *_: wakeup.notify())
            # Anything committed while we were not listening is found by this first poll.
            wakeup.notify()
            while not stop.is_set() and not connection.is_closed():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=5)
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("notification_listener_down", error=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1)
        finally:
            if connection is not None:
                with contextlib.suppress(Exception):
                    await connection.close(timeout=2)
