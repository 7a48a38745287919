"""A webhook's delivery health (its last success and the run of failures since), set from each
batch of recorded attempts, and read by webhooks.service.deactivate_failing_webhooks.

The rule: a success ends the failing run; a failure starts one unless one is running; each
attempt counts by the time it started, whenever it was recorded (attempts are recorded as they
finish, so a batch may hold attempts older than one recorded before).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue.backend import Outcome


class DeliveryHealth(NamedTuple):
    """What a batch of recorded attempts says of one webhook's health."""

    webhook_id: int
    succeeded_at: datetime | None  # the start of its latest successful attempt in the batch
    failed_at: tuple[datetime, ...]  # the starts of its failed attempts after that one


def delivery_health(outcomes: Sequence[Outcome]) -> list[DeliveryHealth]:
    """Each webhook's latest success in the batch and its failures after that, by the time
    each attempt started. A delivery cancelled unsent (FAILED), or an attempt that failed
    inside Tucano, says nothing of the receiver."""
    succeeded: dict[int, datetime] = {}
    failed: dict[int, list[datetime]] = {}
    for o in outcomes:
        webhook_id = o.claimed.webhook_id
        if not o.about_the_receiver:
            continue
        if o.status == ResultStatus.SUCCESS:
            if webhook_id not in succeeded or o.attempted_at > succeeded[webhook_id]:
                succeeded[webhook_id] = o.attempted_at
        elif o.status in (ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED):
            failed.setdefault(webhook_id, []).append(o.attempted_at)
    return [
        DeliveryHealth(
            webhook_id,
            succeeded.get(webhook_id),
            tuple(
                at
                for at in failed.get(webhook_id, ())
                if webhook_id not in succeeded or at > succeeded[webhook_id]
            ),
        )
        for webhook_id in succeeded.keys() | failed.keys()
    ]


def next_health(
    last_success_at: datetime | None, failing_since: datetime | None, batch: DeliveryHealth
) -> tuple[datetime | None, datetime | None]:
    """A webhook's (last success, failing since) once `batch` is counted in: the latest
    success of both, and the earliest failure after it of the run kept and the batch's."""
    last = max((at for at in (last_success_at, batch.succeeded_at) if at), default=None)
    failures = (at for at in (*batch.failed_at, failing_since) if at)
    return last, min((at for at in failures if last is None or at > last), default=None)
