"""One attempt, phase by phase: prepare it (is it still to be sent, and its signed headers), make
the HTTP call, then handle a success or a failure (the retry on the schedule, or exhausted).
Also the outcome of an attempt that failed inside Tucano, and of a delivery cancelled unsent."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import structlog

from tucano.config import Settings
from tucano.core.clock import clock, format_utc
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.deliveries.worker.retry import next_attempt_delay
from tucano.deliveries.worker.sender import USER_AGENT, Sender
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


async def attempt(
    claimed: ClaimedDelivery, *, sender: Sender, retries: RetryPolicy, attempted_at: datetime
) -> Outcome:
    """Send `claimed` to its webhook as it is now (or not, if the webhook no longer takes it)."""
    prepared = prepare_attempt(claimed, at=attempted_at)
    if isinstance(prepared, Outcome):
        log_unsuccessful(prepared)
        return prepared
    outcome = await make_http_call(claimed, prepared, sender=sender, at=attempted_at)
    if outcome.succeeded:
        return handle_success(outcome)
    failed = handle_failure(outcome, retries=retries)
    log_unsuccessful(failed)
    return failed


def log_unsuccessful(outcome: Outcome) -> None:
    """One line for an attempt that did not succeed: where it went and what came of it, for an
    operator who is asked why a merchant heard nothing. Never the payload nor the answer's body."""
    target = urlsplit(outcome.target_url)
    log.info(
        "delivery_attempt_failed",
        deliveryId=outcome.claimed.delivery_id,
        eventId=outcome.claimed.event_id,
        webhookId=outcome.claimed.webhook_id,
        customerId=outcome.claimed.customer_id,
        targetHost=target.netloc.rpartition("@")[2],
        attempt=outcome.claimed.attempt,
        status=outcome.status,
        httpStatus=outcome.http_status,
        error=outcome.error_message,
        nextAttemptAt=None
        if outcome.next_attempt_at is None
        else format_utc(outcome.next_attempt_at),
    )


def prepare_attempt(claimed: ClaimedDelivery, *, at: datetime) -> Mapping[str, str] | Outcome:
    """The signed headers of the attempt, or, when the webhook no longer takes the delivery,
    the outcome that says why it was not sent."""
    assert claimed.target_url is not None
    if not claimed.webhook_active:
        return not_sent(claimed, "the webhook is inactive", at=at)
    if claimed.subscribed_to != claimed.event_type:
        # Its owner changed what it receives since the delivery was queued (PUT eventType).
        return not_sent(
            claimed,
            f"the webhook now receives {claimed.subscribed_to}, not {claimed.event_type}",
            at=at,
        )
    return delivery_headers(
        secrets=claimed.signing_secrets,
        message_id=claimed.event_id,
        timestamp=int(time.time()),
        body=claimed.payload,
        event_type=claimed.event_type,
        user_agent=USER_AGENT,
    )


async def make_http_call(
    claimed: ClaimedDelivery, headers: Mapping[str, str], *, sender: Sender, at: datetime
) -> Outcome:
    """The POST itself, outside any transaction: SUCCESS on a 2xx, FAILED otherwise."""
    return await sender.send(claimed, headers=headers, now=at)


def handle_success(outcome: Outcome) -> Outcome:
    """A 2xx: the delivery is done, with no next attempt."""
    return outcome._replace(status=ResultStatus.SUCCESS, next_attempt_at=None)


def handle_failure(outcome: Outcome, *, retries: RetryPolicy) -> Outcome:
    """A failure: retried at the schedule's next time (the receiver's Retry-After as a floor),
    or EXHAUSTED once the schedule is used up."""
    delay = next_attempt_delay(
        attempts_made=outcome.claimed.attempt,
        schedule=retries.schedule,
        rng=retries.rng,
        retry_after=outcome.retry_after,
        retry_after_max=retries.retry_after_max,
    )
    if delay is None:
        return outcome._replace(status=ResultStatus.EXHAUSTED, next_attempt_at=None)
    return outcome._replace(status=ResultStatus.PENDING_RETRY, next_attempt_at=clock.now() + delay)


def not_sent(claimed: ClaimedDelivery, why: str, *, at: datetime) -> Outcome:
    """The last record of a delivery cancelled before its attempt."""
    return Outcome(
        claimed=claimed,
        status=ResultStatus.FAILED,
        target_url=claimed.target_url or "",
        http_status=None,
        response_body=None,
        error_message=f"not sent: {why}; this delivery is cancelled",
        duration_ms=0,
        attempted_at=at,
        next_attempt_at=None,
    )


def crashed_outcome(
    claimed: ClaimedDelivery, *, retries: RetryPolicy, attempted_at: datetime
) -> Outcome | None:
    """The record of an attempt that failed inside Tucano: a failed attempt like any other,
    retried on the schedule, so that a fault that repeats shows in the history and ends with the
    schedule (left to the lease, it would come back unrecorded for ever). None if even that
    fails: then the lease is all there is."""
    try:
        crash = Outcome(
            claimed=claimed,
            status=ResultStatus.FAILED,
            target_url=claimed.target_url or "",
            http_status=None,
            response_body=None,
            error_message=CRASHED_MESSAGE,
            duration_ms=0,
            attempted_at=attempted_at,
            next_attempt_at=None,
            about_the_receiver=False,
        )
        return handle_failure(crash, retries=retries)
    except Exception:
        log.exception("delivery_attempt_unrecordable", deliveryId=claimed.delivery_id)
        return None
