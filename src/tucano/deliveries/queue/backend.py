"""The delivery queue's contract: what a claim hands a worker (`ClaimedDelivery`: what is to be
sent, and where), what a worker hands back to be recorded (`Outcome`: what came of it), and
the three operations every back end offers (`QueueBackend`). tests/deliveries/queue holds the
one suite every back end passes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

import structlog

from tucano.core.secret_box import SecretBoxError
from tucano.deliveries.models import ResultStatus
from tucano.webhooks.secret_store import WebhookSecretStore

log = structlog.get_logger("tucano.deliveries")


# NamedTuples rather than frozen dataclasses on the worker's path: one of each per delivery, and
# a frozen dataclass pays a setattr call per field to be made.
class ClaimedDelivery(NamedTuple):
    """A delivery a worker holds under its lease: what is to be sent, and where."""

    delivery_id: int
    claim_token: str  # an outcome moves the delivery only while this is still its claim
    event_id: str
    event_type: str
    customer_id: int
    webhook_id: int
    attempt: int  # the number of the attempt about to be made, 1-based
    payload: bytes  # the exact body, fixed when the event was published
    lease_until: datetime  # after this, another worker may claim it
    event_created_at: datetime  # in its publishing transaction: where delivery latency starts
    # The webhook as it is now: its URL (None once it is deleted), whether it is active and
    # what it receives (a PUT may have changed either since the delivery was queued), and every
    # secret that signs right now (the current one, then those in their grace).
    target_url: str | None
    webhook_active: bool
    subscribed_to: str | None
    signing_secrets: tuple[str, ...]


class Outcome(NamedTuple):
    """What came of one attempt, as its result row records it."""

    claimed: ClaimedDelivery
    status: str  # a ResultStatus
    target_url: str
    http_status: int | None
    response_body: str | None
    error_message: str | None
    duration_ms: int
    attempted_at: datetime
    next_attempt_at: datetime | None
    # False when the attempt failed inside Tucano: it says nothing of the receiver's health
    # (automatic deactivation must not switch a merchant's webhook off for Tucano's fault).
    about_the_receiver: bool = True
    # What the receiver asked for with Retry-After (429, 503): a floor for the next attempt.
    retry_after: timedelta | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == ResultStatus.SUCCESS


class Claim(NamedTuple):
    deliveries: list[ClaimedDelivery]
    # Whether more may be due than this claim took (it filled one of its queues' shares).
    more_due: bool


class QueueBackend(Protocol):
    """The queue's own operations, each committed on its own (never part of a business
    change). Chosen once at start-up (deliveries.queue.queue_for)."""

    async def claim(
        self,
        *,
        secret_store: WebhookSecretStore,
        limit: int,
        lease: timedelta,
        exclude_webhooks: Sequence[int] = (),
        exclude_hosts: Sequence[str] = (),
    ) -> Claim:
        """Take up to `limit` due deliveries until `lease` runs out. Retries take up to a
        quarter of each claim and first attempts the rest, so a backlog of retries to a failing
        receiver cannot hold back new events, nor new events starve retries. Deliveries of
        `exclude_webhooks`, and to `exclude_hosts` (scheme://host[:port] in lower case), are
        left for others. A delivery whose webhook's secrets do not open (a key missing from the
        settings) is logged and left under its lease, to be claimed again once it passes."""
        ...

    async def record(self, outcomes: Sequence[Outcome]) -> None:
        """Record a batch of attempts: a result row each (and the hour counts), each delivery
        still held under its claim moved on (a retry to its next time, a finished one off the
        queue), and the webhooks' delivery health. A retry whose delivery has left the queue
        meanwhile (its webhook deleted) is recorded by `not_retried`."""
        ...

    async def release(
        self, claims: Sequence[ClaimedDelivery], *, due_at: datetime, lease: timedelta
    ) -> list[ClaimedDelivery]:
        """Give claimed deliveries back (taken for `lease`), unattempted, due again at `due_at`.
        Returns those whose webhook was deleted while they were held, and which nobody has
        recorded since: the deletion left their last record to their holder."""
        ...

    async def serve(self, stop: asyncio.Event, due: asyncio.Event) -> None:
        """What the back end runs beside a worker until `stop` (the relay, on NATS); `due` is
        set when deliveries may have come due (committed here or, notified, elsewhere)."""
        ...

    async def close(self) -> None:
        """Let go of what the back end holds beside the database (its connections)."""
        ...


def retries_share(limit: int) -> int:
    """How many of a claim of `limit` may be retries."""
    return max(1, limit // 4)


# A retry whose delivery has left the queue meanwhile (its webhook deleted) will not happen: its
# record says so, FAILED rather than PENDING_RETRY, with this after its error (or alone).
NOT_RETRIED = "; not retried: the delivery was cancelled or finished meanwhile"
ERROR_MESSAGE_LENGTH = 500  # delivery_results.error_message


def not_retried(outcome: Outcome) -> Outcome:
    """How a retry whose delivery has left the queue is recorded: FAILED, with no next time
    and NOT_RETRIED after its error message, if any."""
    if outcome.status != ResultStatus.PENDING_RETRY:
        return outcome
    return outcome._replace(
        status=ResultStatus.FAILED,
        error_message=((outcome.error_message or "") + NOT_RETRIED)[:ERROR_MESSAGE_LENGTH],
        next_attempt_at=None,
    )


def claimed_delivery(
    row: Mapping[str, Any],
    *,
    token: str,
    lease_until: datetime,
    secret_store: WebhookSecretStore,
    now: datetime,
) -> ClaimedDelivery | None:
    """A claimed delivery from a row of a back end's claim (columns named as the fields, with
    `attempts` made so far and the webhook's sealed `secret` and `previous_secrets`); None,
    logged, when its secrets do not open."""
    secrets: tuple[str, ...] = ()
    if row["target_url"] is not None:
        try:
            secrets = secret_store.signing_secrets(
                row["webhook_id"], row["secret"], row["previous_secrets"], now=now
            )
        except SecretBoxError as exc:
            log.error("webhook_secret_unreadable", webhookId=row["webhook_id"], error=str(exc))
            return None
    return ClaimedDelivery(
        delivery_id=row["delivery_id"],
        claim_token=token,
        event_id=row["event_id"],
        event_type=row["event_type"],
        customer_id=row["customer_id"],
        webhook_id=row["webhook_id"],
        attempt=row["attempts"] + 1,
        payload=row["payload"].encode(),
        lease_until=lease_until,
        event_created_at=row["event_created_at"],
        target_url=row["target_url"],
        webhook_active=bool(row["is_active"]),
        subscribed_to=row["subscribed_to"],
        signing_secrets=secrets,
    )
