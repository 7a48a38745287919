"""The delivery queue: workers claim due deliveries under a short lease, send them outside any
transaction, record the outcomes in batches, and release what they did not attempt.

Each operation runs on its own, not in a caller's session, through the backend of the
database's dialect (postgres.py, sqlite.py: one QueueBackend each, see backend.py)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import cast

import structlog
from sqlalchemy import Table, bindparam, select, update

from tucano.core.clock import clock
from tucano.core.secret_box import SecretBoxError
from tucano.db.bulk import in_parts
from tucano.db.database import Database
from tucano.deliveries.cancellation import HeldDelivery, recorded_since_claimed
from tucano.deliveries.health import delivery_health
from tucano.deliveries.models import Delivery
from tucano.deliveries.queue.backend import (
    NOT_RETRIED,
    Claim,
    ClaimedDelivery,
    Outcome,
    OutcomeRow,
    QueueBackend,
)
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.deliveries.queue.sqlite import SqliteQueue
from tucano.webhooks import service as webhooks
from tucano.webhooks.secret_store import WebhookSecretStore

__all__ = [
    "NOT_RETRIED",
    "Claim",
    "ClaimedDelivery",
    "Outcome",
    "claim_due_deliveries",
    "record_outcomes",
    "release_claims",
]

log = structlog.get_logger("tucano.deliveries")

_DELIVERIES = cast(Table, Delivery.__table__)
_POSTGRES = PostgresQueue()
_SQLITE = SqliteQueue()


def backend_of(database: Database) -> QueueBackend:
    """The queue's backend for this database's dialect."""
    return _POSTGRES if database.dialect == "postgresql" else _SQLITE


async def claim_due_deliveries(
    database: Database,
    *,
    secret_store: WebhookSecretStore,
    limit: int,
    lease: timedelta,
    exclude_webhooks: Sequence[int] = (),
    exclude_hosts: Sequence[str] = (),
) -> Claim:
    """Take up to `limit` due deliveries for this worker until `lease` runs out.

    Retries may take up to a quarter of each batch and first attempts take the rest, so a
    backlog of retries to a failing receiver cannot hold back new events, nor new events starve
    retries. Deliveries of `exclude_webhooks`, and to `exclude_hosts` (scheme://host[:port] in
    lower case), are left for others. Each target carries its webhook's secrets, opened by
    `secret_store`; a delivery whose webhook's secrets do not open (a key missing from the
    settings) is logged and left under its lease, to be claimed again once it passes.
    """
    now = clock.now()
    token = secrets.token_hex(16)
    retries = max(1, limit // 4)
    rows = await backend_of(database).claim(
        database,
        retries=retries,
        limit=limit,
        now=now,
        until=now + lease,
        token=token,
        exclude_webhooks=exclude_webhooks,
        exclude_hosts=exclude_hosts,
    )
    claimed = []
    for row in rows:
        target = None
        if row.target_url is not None:
            assert row.is_active is not None and row.secret is not None
            assert row.subscribed_to is not None
            try:
                secrets_now = secret_store.signing_secrets(
                    row.webhook_id, row.secret, row.previous_secrets, now=now
                )
            except SecretBoxError as exc:
                log.error("webhook_secret_unreadable", webhookId=row.webhook_id, error=str(exc))
                continue
            target = webhooks.DeliveryTarget(
                row.webhook_id, row.target_url, row.is_active, secrets_now, row.subscribed_to
            )
        claimed.append(
            ClaimedDelivery(
                row.delivery_id,
                token,
                row.event_id,
                row.event_type,
                row.customer_id,
                row.webhook_id,
                row.attempts + 1,
                row.payload.encode(),
                target,
                now + lease,
                row.event_created_at,
            )
        )
    retried = sum(1 for c in claimed if c.attempt > 1)
    return Claim(claimed, more_due=retried >= retries or len(claimed) >= limit)


async def record_outcomes(database: Database, outcomes: Sequence[Outcome]) -> None:
    """Write a batch of attempts: their result rows, their deliveries' new state, and the
    webhooks' delivery health."""
    if not outcomes:
        return
    await backend_of(database).record(
        database,
        [OutcomeRow.of(o) for o in outcomes],
        now=clock.now(),
        health=delivery_health(outcomes),
    )


async def release_claims(
    database: Database, claims: Sequence[ClaimedDelivery], *, due_at: datetime, lease: timedelta
) -> list[ClaimedDelivery]:
    """Give claimed deliveries back (taken for `lease`), unattempted, due again at `due_at`.
    Returns those whose webhook was deleted meanwhile while they were held: the deletion took
    them off the queue and left them to their holder to record (cancel_deliveries_to).

    Written once for both databases, through SQLAlchemy: a give-back is not on the path of
    every delivery."""
    if not claims:
        return []
    table = _DELIVERIES
    async with database.session() as session:
        await session.execute(
            update(table)
            .where(table.c.id == bindparam("b_id"), table.c.claim_token == bindparam("b_token"))
            .values(next_attempt_at=due_at, claim_token=None, lease_until=None),
            # In id order, the order a webhook's deletion locks them in: in any other, the two
            # could deadlock, and PostgreSQL would undo one of them.
            [
                {"b_id": c.delivery_id, "b_token": c.claim_token}
                for c in sorted(claims, key=lambda c: c.delivery_id)
            ],
        )
        # Run after the update, which waited for a deletion holding these rows: a row gone
        # with its webhook was cancelled. (Gone with the webhook still there, another worker
        # claimed it once this lease ran out, and finished it.)
        queued: set[int] = set()
        for part in in_parts([c.delivery_id for c in claims]):
            queued.update(await session.scalars(select(table.c.id).where(table.c.id.in_(part))))
        gone = [c for c in claims if c.delivery_id not in queued]
        existing = (
            await webhooks.existing_webhook_ids(session, (c.webhook_id for c in gone))
            if gone
            else set()
        )
        cancelled = [c for c in gone if c.webhook_id not in existing]
        # Unless it was already recorded since the claim: by the deletion (whose time the lease
        # had run out by), or by another worker that took it after this lease.
        recorded = await recorded_since_claimed(
            session,
            (
                HeldDelivery(c.customer_id, c.webhook_id, c.delivery_id, c.lease_until - lease)
                for c in cancelled
            ),
        )
        await session.commit()
    return [c for c in cancelled if (c.delivery_id, c.attempt) not in recorded]
