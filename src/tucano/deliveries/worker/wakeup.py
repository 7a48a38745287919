"""Telling delivery workers what changed, at once rather than at the next poll.

- New deliveries committed: `publish_events` registers `wakeup.notify` to run after its
  transaction commits (this process) and runs `pg_notify` in it (other processes on PostgreSQL).
- A webhook changed or deleted: the webhooks service does the same with `webhook_changes` and
  its own channel (`tucano.webhooks.changes`), which the listener here relays, so that workers
  drop what they hold for it under the old URL, secret or state (see loop.py).

Every worker keeps one connection LISTENing on PostgreSQL. Workers still poll
(TUCANO_DELIVERY_POLL_INTERVAL_SECONDS) for retries that come due and for other processes on
SQLite, which has no notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import asyncpg
import structlog

from tucano.db.engines import connect_asyncpg
from tucano.webhooks.changes import WEBHOOK_CHANNEL, WebhookChanges, webhook_changes

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


def _relay_webhook_change(_connection: object, _pid: int, _channel: str, payload: str) -> None:
    change = WebhookChanges.decode(payload)
    if change is not None:
        webhook_changes.notify(change)


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


def _on_connection_lost(listened_before: bool) -> None:
    """The listener just lost its connection: what workers hold may already be stale (a webhook
    deleted while the connection was going), so they are told at once, not only once it is back
    (as they are then too, for what changed in between)."""
    if listened_before:
        webhook_changes.notify_missed()


async def _wait_for_either(first: asyncio.Event, second: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def listen_for_notifications(
    database_url: str, stop: asyncio.Event, *, probe_every: float = 5.0
) -> None:
    """Relay PostgreSQL notifications to `wakeup` and `webhook_changes`, reconnecting until
    `stop`. A connection that a NAT or firewall dropped without a word looks open for hours (TCP
    keepalive starts after two): a `SELECT 1` every `probe_every` seconds, answered within as
    long, finds it out, and the loop connects again, then tells `webhook_changes` that changes
    may have been missed meanwhile."""
    listened_before = False
    down = ListenerOutage()
    while not stop.is_set():
        connection: asyncpg.Connection | None = None
        try:
            opened: asyncpg.Connection = await asyncio.wait_for(
                connect_asyncpg(database_url), probe_every
            )
            connection = opened
            # A connection the server ended (an administrator, a restart) says so at once.
            lost = asyncio.Event()
            opened.add_termination_listener(lambda _closed, lost=lost: lost.set())
            await opened.add_listener(NOTIFY_CHANNEL, lambda *_: wakeup.notify())
            await opened.add_listener(WEBHOOK_CHANNEL, _relay_webhook_change)
            # Anything committed while we were not listening is found by this first poll.
            wakeup.notify()
            if listened_before:
                webhook_changes.notify_missed()
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
            if down.failed(type(exc).__name__):  # once per outage: it tries every second
                _on_connection_lost(listened_before)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1)
        finally:
            if connection is not None and stop.is_set():
                with contextlib.suppress(Exception):
                    await connection.close(timeout=2)
            elif connection is not None:  # dropped or failing: no goodbye to wait for
                connection.terminate()
