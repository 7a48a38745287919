"""What the delivery queue's backends share: the row types of a claim and of a record, and the
protocol each database's backend (postgres.py, sqlite.py) implements."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from tucano.db.database import Database
from tucano.deliveries.health import DeliveryHealth
from tucano.deliveries.models import ResultStatus
from tucano.webhooks import service as webhooks


# NamedTuples rather than frozen dataclasses on the worker's path: one of each per delivery, and
# a frozen dataclass pays a setattr call per field to be made.
class ClaimedDelivery(NamedTuple):
    delivery_id: int
    claim_token: str
    event_id: str
    event_type: str
    customer_id: int
    webhook_id: int
    attempt: int  # the number of the attempt about to be made, 1-based
    payload: bytes
    target: webhooks.DeliveryTarget | None  # None when the webhook is gone
    lease_until: datetime  # after this, another worker may claim it
    event_created_at: datetime  # in its publishing transaction: where delivery latency starts


class Claim(NamedTuple):
    deliveries: list[ClaimedDelivery]
    # Whether more may be due than this claim took (it filled one of its queues' shares).
    more_due: bool


class Outcome(NamedTuple):
    """What happened to one claimed delivery, ready to be recorded."""

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


class ClaimedRow(NamedTuple):
    """A claimed delivery as a backend's claim statement selects it (columns of these names,
    in this order), with its event and its webhook (None columns when the webhook is gone)."""

    delivery_id: int
    event_id: str
    webhook_id: int
    customer_id: int
    attempts: int  # attempts made before this claim
    event_type: str
    payload: str
    target_url: str | None
    is_active: bool | None
    secret: str | None
    previous_secrets: str | None
    subscribed_to: str | None  # the webhook's event type now
    event_created_at: datetime  # SQLite's text, parsed by its backend


# The claim statements' select list, as `ClaimedRow` names its columns.
CLAIMED_COLUMNS = """{d}.id AS delivery_id, {d}.event_id, {d}.webhook_id, {d}.customer_id,
       {d}.attempts, e.event_type, e.payload, w.target_url, w.is_active, w.secret,
       w.previous_secrets, w.event_type AS subscribed_to, e.created_at AS event_created_at"""


class OutcomeRow(NamedTuple):
    """One attempt to record: its delivery as claimed, and what happened (a result row, with the
    claim token that says whether it may still move its delivery)."""

    delivery_id: int
    claim_token: str
    customer_id: int
    webhook_id: int
    event_id: str
    event_type: str
    target_url: str
    attempt: int
    status: str
    http_status: int | None
    response_body: str | None
    error_message: str | None
    duration_ms: int
    attempted_at: datetime
    next_attempt_at: datetime | None

    @classmethod
    def of(cls, o: Outcome) -> OutcomeRow:
        c = o.claimed
        return cls(
            c.delivery_id,
            c.claim_token,
            c.customer_id,
            c.webhook_id,
            c.event_id,
            c.event_type,
            o.target_url,
            c.attempt,
            o.status,
            o.http_status,
            o.response_body,
            o.error_message,
            o.duration_ms,
            o.attempted_at,
            o.next_attempt_at,
        )


# The columns of delivery_results an outcome fills (all of OutcomeRow but the claim token).
RESULT_NAMES = tuple(name for name in OutcomeRow._fields if name != "claim_token")
RESULT_COLUMNS = ", ".join(RESULT_NAMES)

# Due and not held (a claim sets `lease_until` and nothing else a due query or an index reads).
NOT_LEASED = "(lease_until IS NULL OR lease_until <= {now})"

# A retry whose delivery has left the queue meanwhile (its webhook deleted) will not happen: its
# record says so, FAILED rather than PENDING_RETRY, with this after its error (or alone).
NOT_RETRIED = "; not retried: the delivery was cancelled or finished meanwhile"
ERROR_MESSAGE_LENGTH = 500  # delivery_results.error_message


def vanished_retry(row: OutcomeRow) -> OutcomeRow:
    """How a retry (PENDING_RETRY) whose delivery has left the queue is recorded: FAILED, with
    no next time and NOT_RETRIED after its error message, if any. (SQLite's record.)"""
    error_message = ((row.error_message or "") + NOT_RETRIED)[:ERROR_MESSAGE_LENGTH]
    return row._replace(
        status=ResultStatus.FAILED, error_message=error_message, next_attempt_at=None
    )


def vanished_retry_sql(row: str, *, vanished: str) -> dict[str, str]:
    """vanished_retry in SQL (PostgreSQL's record): the result columns it sets, as expressions
    of the outcome `row` (an alias) that apply it where the condition `vanished` holds."""
    error_message = f"COALESCE({row}.error_message, '') || '{NOT_RETRIED}'"
    return {
        "status": f"CASE WHEN {vanished} THEN '{ResultStatus.FAILED}' ELSE {row}.status END",
        "error_message": f"CASE WHEN {vanished} THEN substr({error_message}, 1,"
        f" {ERROR_MESSAGE_LENGTH}) ELSE {row}.error_message END",
        "next_attempt_at": f"CASE WHEN {vanished} THEN NULL ELSE {row}.next_attempt_at END",
    }


class QueueBackend(Protocol):
    """The queue's own operations on one database, each committed on its own: not part of any
    business change, so never in a caller's session."""

    async def claim(
        self,
        database: Database,
        *,
        retries: int,
        limit: int,
        now: datetime,
        until: datetime,
        token: str,
        exclude_webhooks: Sequence[int],
        exclude_hosts: Sequence[str],
    ) -> Sequence[ClaimedRow]:
        """Lease up to `retries` due retries and first attempts up to `limit` in all, until
        `until`, under `token`."""
        ...

    async def record(
        self,
        database: Database,
        rows: Sequence[OutcomeRow],
        *,
        now: datetime,
        health: Sequence[DeliveryHealth],
    ) -> None:
        """Insert the attempts' results and counts, move on the deliveries still held under
        their claim token, and set the webhooks' delivery health."""
        ...
