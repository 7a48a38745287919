"""What one attempt becomes: the signed POST, then its `Outcome` (success, a retry at the next
time on the schedule, or exhausted); the outcome of an attempt that failed inside Tucano; and
the last record of a delivery cancelled before its attempt."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog

from tucano.config import Settings
from tucano.core.clock import clock
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.deliveries.worker.retry import next_attempt_delay
from tucano.deliveries.worker.sender import USER_AGENT, Sender, SendResult
from tucano.webhooks.signing import delivery_headers

log = structlog.get_logger("tucano.deliveries")

CRASHED_MESSAGE = (
    "failed: an internal error in Tucano during the attempt (the receiver may have got it or "
    "not; the service's log has it, with this event's id); retried on the schedule"
)


@dataclass(frozen=True)
class RetryPolicy:
    """The configured schedule of retries, and the cap on a receiver's Retry-After."""

    schedule: Sequence[timedelta]
    retry_after_max: timedelta
    rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            schedule=settings.retry_schedule,
            retry_after_max=timedelta(seconds=settings.retry_after_max_seconds),
        )


def not_sent(delivery: ClaimedDelivery, why: str, *, at: datetime) -> Outcome:
    """The last record of a delivery cancelled before its attempt."""
    return Outcome(
        claimed=delivery,
        status=ResultStatus.FAILED,
        target_url=delivery.target.target_url if delivery.target else "",
        http_status=None,
        response_body=None,
        error_message=f"not sent: {why}; this delivery is cancelled",
        duration_ms=0,
        attempted_at=at,
        next_attempt_at=None,
    )


async def attempt(
    delivery: ClaimedDelivery, *, sender: Sender, retries: RetryPolicy, attempted_at: datetime
) -> Outcome:
    """Send `delivery` to its webhook as it is now (or not, if the webhook no longer takes it)."""
    target = delivery.target
    assert target is not None
    if not target.is_active:
        return not_sent(delivery, "the webhook is inactive", at=attempted_at)
    if target.event_type != delivery.event_type:
        # Its owner changed what it receives since the delivery was queued (PUT eventType).
        return not_sent(
            delivery,
            f"the webhook now receives {target.event_type}, not {delivery.event_type}",
            at=attempted_at,
        )
    headers = delivery_headers(
        secrets=target.signing_secrets,
        message_id=delivery.event_id,
        timestamp=int(time.time()),
        body=delivery.payload,
        event_type=delivery.event_type,
        user_agent=USER_AGENT,
    )
    result = await sender.send(
        target.target_url, body=delivery.payload, headers=headers, now=attempted_at
    )
    return outcome_of(delivery, result, retries=retries, attempted_at=attempted_at)


def outcome_of(
    delivery: ClaimedDelivery, result: SendResult, *, retries: RetryPolicy, attempted_at: datetime
) -> Outcome:
    """The record of one attempt: a success, or a failure retried at the schedule's next time
    (EXHAUSTED once the schedule is used up)."""
    assert delivery.target is not None
    next_at = None
    if result.succeeded:
        status = ResultStatus.SUCCESS
    else:
        delay = next_attempt_delay(
            attempts_made=delivery.attempt,
            schedule=retries.schedule,
            rng=retries.rng,
            retry_after=result.retry_after,
            retry_after_max=retries.retry_after_max,
        )
        status = ResultStatus.EXHAUSTED if delay is None else ResultStatus.PENDING_RETRY
        next_at = None if delay is None else clock.now() + delay
    return Outcome(
        claimed=delivery,
        status=status,
        target_url=delivery.target.target_url,
        http_status=result.http_status,
        response_body=result.response_body,
        error_message=result.error_message,
        duration_ms=result.duration_ms,
        attempted_at=attempted_at,
        next_attempt_at=next_at,
    )


def crashed_outcome(
    delivery: ClaimedDelivery, *, retries: RetryPolicy, attempted_at: datetime
) -> Outcome | None:
    """The record of an attempt that failed inside Tucano: a failed attempt like any other,
    retried on the schedule, so that a fault that repeats shows in the history and ends with the
    schedule (left to the lease, it would come back unrecorded for ever). None if even that
    fails: then the lease is all there is."""
    crash = SendResult(
        http_status=None, response_body=None, error_message=CRASHED_MESSAGE, duration_ms=0
    )
    try:
        outcome = outcome_of(delivery, crash, retries=retries, attempted_at=attempted_at)
        return outcome._replace(about_the_receiver=False)
    except Exception:
        log.exception("delivery_attempt_unrecordable", deliveryId=delivery.delivery_id)
        return None
