"""Telling delivery workers what changed, at once rather than at the next poll.

- New deliveries committed: `deliveries.service.publish_events` registers `wakeup.notify` to
  run after its transaction commits (this process) and notifies NOTIFY_CHANNEL in it (other
  processes, on PostgreSQL).
- A webhook changed or deleted: the webhooks service does the same with `webhook_changes` and
  its own channel (`tucano.webhooks.changes`), which the listener here relays, so that workers
  drop what they hold for it under the old URL, secret or state (see loop.py).

Workers still poll (TUCANO_DELIVERY_POLL_INTERVAL_SECONDS) for retries that come due, and for
other processes on SQLite, which has no notifications.
"""

from __future__ import annotations

import asyncio

from tucano.db.notifications import listen
from tucano.webhooks.changes import WEBHOOK_CHANNEL, WebhookChanges, webhook_changes

NOTIFY_CHANNEL = "tucano_deliveries"


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


def _relay_webhook_change(payload: str) -> None:
    change = WebhookChanges.decode(payload)
    if change is not None:
        webhook_changes.notify(change)


def _on_listening(again: bool) -> None:
    # Anything committed while nobody listened is found by this first claim; and what workers
    # hold may be stale (a webhook changed meanwhile).
    wakeup.notify()
    if again:
        webhook_changes.notify_missed()


async def listen_for_notifications(
    database_url: str, stop: asyncio.Event, *, probe_every: float = 5.0
) -> None:
    """Relay the database's notifications to `wakeup` and `webhook_changes` until `stop`. When
    the connection is lost, what workers hold may already be stale (a webhook deleted while it
    was going), so they are told at once, and again once it is back."""
    await listen(
        database_url,
        {NOTIFY_CHANNEL: lambda _payload: wakeup.notify(), WEBHOOK_CHANNEL: _relay_webhook_change},
        stop,
        on_listening=_on_listening,
        on_lost=webhook_changes.notify_missed,
        probe_every=probe_every,
    )
