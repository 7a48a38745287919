"""How deliveries to a webhook went lately, as a person checks it (the portal's webhooks list):
attempts about the receiver over a recent period, and the latest attempt of all."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class WebhookActivity(NamedTuple):
    """How deliveries to one webhook went lately, as a person checks it: attempts that reached
    (or failed to reach) the receiver over a recent period, and the latest attempt of all."""

    succeeded: int
    failed: int  # attempts the receiver failed (PENDING_RETRY or EXHAUSTED)
    last_attempt_at: datetime | None
    last_status: str | None  # a ResultStatus
    last_http_status: int | None

    @property
    def attempts(self) -> int:
        return self.succeeded + self.failed

    @property
    def success_percent(self) -> int | None:
        """Whole percent of attempts that succeeded, rounded down (so 100 only when all did);
        None without attempts."""
        return None if not self.attempts else 100 * self.succeeded // self.attempts


NO_ACTIVITY = WebhookActivity(0, 0, None, None, None)
