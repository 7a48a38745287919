"""The webhook change bus: the webhooks service announces a webhook changed or deleted, and
delivery workers drop what they hold for it under the old URL, secret or state.

In this process the bus is `webhook_changes`; other processes hear it on PostgreSQL through
WEBHOOK_CHANNEL, relayed by the workers' listener (`deliveries.worker.wakeup`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

WEBHOOK_CHANNEL = "tucano_webhooks"


class WebhookChange(NamedTuple):
    webhook_id: int
    deleted: bool  # else changed: its URL, secret or state


class WebhookChanges:
    """A broadcast of webhook changes to every listener of this process."""

    def __init__(self) -> None:
        self._listeners: set[Callable[[WebhookChange | None], None]] = set()

    def notify(self, change: WebhookChange) -> None:
        for listener in list(self._listeners):
            listener(change)

    def notify_missed(self) -> None:
        """Changes may have gone unheard (the listener was down): any webhook may have changed.
        Listeners are called with None."""
        for listener in list(self._listeners):
            listener(None)

    def listen(self, listener: Callable[[WebhookChange | None], None]) -> None:
        self._listeners.add(listener)

    def forget(self, listener: Callable[[WebhookChange | None], None]) -> None:
        self._listeners.discard(listener)

    @staticmethod
    def encode(change: WebhookChange) -> str:
        return f"{change.webhook_id}:{'deleted' if change.deleted else 'changed'}"

    @staticmethod
    def decode(payload: str) -> WebhookChange | None:
        webhook_id, _, kind = payload.partition(":")
        if not webhook_id.isdigit() or kind not in ("deleted", "changed"):
            return None
        return WebhookChange(int(webhook_id), kind == "deleted")


webhook_changes = WebhookChanges()
