"""The delivery queue in the database, through SQLAlchemy: the same statements on SQLite and
PostgreSQL. Each operation is one short transaction of its own; on PostgreSQL a claim skips
rows other workers hold (FOR UPDATE SKIP LOCKED), on SQLite the write lock, taken at BEGIN,
keeps every other writer out meanwhile."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import structlog
from sqlalchemy import Table, and_, bindparam, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.clock import clock
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.db.outages import is_database_unavailable
from tucano.db.repository import in_parts
from tucano.deliveries.health import DeliveryHealth, delivery_health, next_health
from tucano.deliveries.models import Delivery, Event
from tucano.deliveries.queue.backend import (
    Claim,
    ClaimedDelivery,
    Outcome,
    claimed_delivery,
    not_retried,
    retries_share,
)
from tucano.deliveries.repository import FIRST_ATTEMPTS, RETRIES
from tucano.deliveries.result_repository import HeldDelivery, ResultRepository
from tucano.webhooks.models import Webhook
from tucano.webhooks.repository import WebhookRepository
from tucano.webhooks.secret_store import WebhookSecretStore

log = structlog.get_logger("tucano.deliveries")

DELIVERIES = cast(Table, Delivery.__table__)
EVENTS = cast(Table, Event.__table__)
WEBHOOKS = cast(Table, Webhook.__table__)

# What a claimed delivery carries, named as backend.claimed_delivery reads it.
_d, _e, _w = DELIVERIES.c, EVENTS.c, WEBHOOKS.c
CLAIMED_COLUMNS = (
    _d.id.label("delivery_id"),
    _d.event_id,
    _d.webhook_id,
    _d.customer_id,
    _d.attempts,
    _e.event_type,
    _e.payload,
    _e.created_at.label("event_created_at"),
    _w.target_url,
    _w.is_active,
    _w.secret,
    _w.previous_secrets,
    _w.event_type.label("subscribed_to"),
)


def result_row(outcome: Outcome) -> dict[str, Any]:
    """An outcome as its row of delivery_results."""
    c = outcome.claimed
    return {
        "delivery_id": c.delivery_id,
        "customer_id": c.customer_id,
        "webhook_id": c.webhook_id,
        "event_id": c.event_id,
        "event_type": c.event_type,
        "target_url": outcome.target_url,
        "attempt": c.attempt,
        "status": outcome.status,
        "http_status": outcome.http_status,
        "response_body": outcome.response_body,
        "error_message": outcome.error_message,
        "duration_ms": outcome.duration_ms,
        "attempted_at": outcome.attempted_at,
        "next_attempt_at": outcome.next_attempt_at,
    }


def _to_hosts(hosts: Sequence[str]) -> Any:
    """Whether a webhook's URL goes to one of `hosts` (scheme://host[:port], lower case): the
    host followed by nothing, /, ? or #."""
    url = _w.target_url
    return or_(
        *(
            and_(
                func.lower(func.substr(url, 1, len(host))) == host,
                func.substr(url, len(host) + 1, 1).in_(("", "/", "?", "#")),
            )
            for host in hosts
        )
    )


async def due_ids(
    session: AsyncSession,
    queue: Any,
    limit: int,
    now: datetime,
    exclude_webhooks: Sequence[int] = (),
    exclude_hosts: Sequence[str] = (),
) -> list[int]:
    """Ids of up to `limit` due deliveries of one queue that no worker holds, oldest due
    first, locked (other workers' are skipped, not waited for)."""
    if limit <= 0:
        return []
    statement = select(_d.id).where(
        queue, _d.next_attempt_at <= now, or_(_d.lease_until.is_(None), _d.lease_until <= now)
    )
    if exclude_webhooks:
        statement = statement.where(_d.webhook_id.not_in(exclude_webhooks))
    if exclude_hosts:
        statement = statement.where(
            ~exists().where(_w.id == _d.webhook_id, _to_hosts(exclude_hosts))
        )
    statement = statement.order_by(_d.next_attempt_at).limit(limit)
    return list(await session.scalars(statement.with_for_update(skip_locked=True)))


class SqlQueue:
    """QueueBackend in the database, through SQLAlchemy."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def serve(self, stop: asyncio.Event, due: asyncio.Event) -> None:
        """Nothing runs beside the workers: their claims find what is due."""

    async def close(self) -> None:
        """Nothing beside the database, whose pool is the caller's."""

    async def claim(
        self,
        *,
        secret_store: WebhookSecretStore,
        limit: int,
        lease: timedelta,
        exclude_webhooks: Sequence[int] = (),
        exclude_hosts: Sequence[str] = (),
    ) -> Claim:
        now = clock.now()
        token = secrets.token_hex(16)
        until = now + lease
        retries = retries_share(limit)
        async with self.database.session() as session:
            retry_ids = await due_ids(
                session, RETRIES, retries, now, exclude_webhooks, exclude_hosts
            )
            fresh_ids = await due_ids(
                session, FIRST_ATTEMPTS, limit - len(retry_ids), now, exclude_webhooks,
                exclude_hosts,
            )  # fmt: skip
            ids = retry_ids + fresh_ids
            rows: list[Any] = []
            for part in in_parts(ids):
                await session.execute(
                    update(DELIVERIES)
                    .where(_d.id.in_(part))
                    .values(lease_until=until, claim_token=token, updated_at=now)
                )
                rows += (
                    (
                        await session.execute(
                            select(*CLAIMED_COLUMNS)
                            .select_from(
                                DELIVERIES.join(EVENTS, _e.id == _d.event_id).outerjoin(
                                    WEBHOOKS, _w.id == _d.webhook_id
                                )
                            )
                            .where(_d.id.in_(part))
                            .order_by(_d.next_attempt_at, _d.id)
                        )
                    )
                    .mappings()
                    .all()
                )
            await session.commit()
        claimed = [
            claimed_delivery(
                row, token=token, lease_until=until, secret_store=secret_store, now=now
            )
            for row in rows
        ]
        return Claim(
            [c for c in claimed if c is not None],
            more_due=len(retry_ids) >= retries or len(ids) >= limit,
        )

    async def record(self, outcomes: Sequence[Outcome]) -> None:
        if not outcomes:
            return
        now = clock.now()
        async with self.database.session() as session:
            # Locked in id order, as a webhook's deletion locks them: in any other order the two
            # could deadlock. What is read here is the row as it is once locked.
            claims: dict[int, str | None] = {}
            for part in in_parts(sorted({o.claimed.delivery_id for o in outcomes})):
                claims.update(
                    (row[0], row[1])
                    for row in await session.execute(
                        select(_d.id, _d.claim_token)
                        .where(_d.id.in_(part))
                        .order_by(_d.id)
                        .with_for_update()
                    )
                )
            outcomes = [o if o.claimed.delivery_id in claims else not_retried(o) for o in outcomes]
            await ResultRepository(session).add([result_row(o) for o in outcomes])
            # Deliveries move on only where this worker still holds the claim.
            held = [
                o for o in outcomes if claims.get(o.claimed.delivery_id) == o.claimed.claim_token
            ]
            finished = [o.claimed.delivery_id for o in held if o.next_attempt_at is None]
            for part in in_parts(finished):
                await session.execute(delete(DELIVERIES).where(_d.id.in_(part)))
            retried = [o for o in held if o.next_attempt_at is not None]
            if retried:
                await session.execute(
                    update(DELIVERIES)
                    .where(_d.id == bindparam("b_id"))
                    .values(
                        attempts=_d.attempts + 1,
                        next_attempt_at=bindparam("b_next", type_=_d.next_attempt_at.type),
                        claim_token=None,
                        lease_until=None,
                        updated_at=now,
                    ),
                    [{"b_id": o.claimed.delivery_id, "b_next": o.next_attempt_at} for o in retried],
                )
            await session.commit()
        await self.record_health_of(outcomes)

    async def record_health_of(self, outcomes: Sequence[Outcome]) -> None:
        """The webhooks' health from a batch just recorded. Apart from the record: the health
        is advisory (the next batch sets it again), and a deletion locks a webhook before its
        deliveries, the record the other way round."""
        try:
            await self.record_health(delivery_health(outcomes))
        except Exception as exc:
            # The attempts are recorded; raising now would have the caller record them twice.
            if is_database_unavailable(exc):  # an outage: one line, as the worker's others
                log.warning(
                    "delivery_health_update_failed",
                    outcomes=len(outcomes),
                    error=exception_summary(exc),
                )
            else:
                log.exception("delivery_health_update_failed", outcomes=len(outcomes))

    async def record_health(self, health: Sequence[DeliveryHealth]) -> None:
        """Set the webhooks' delivery health from what a batch of recorded attempts says."""
        batch = {h.webhook_id: h for h in health}
        if not batch:
            return
        async with self.database.session() as session:
            webhooks = WebhookRepository(session)
            changed: list[tuple[int, datetime | None, datetime | None]] = []
            for webhook_id, last, failing in await webhooks.delivery_health_for_update(
                sorted(batch)
            ):
                now_last, now_failing = next_health(last, failing, batch[webhook_id])
                if (now_last, now_failing) != (last, failing):
                    changed.append((webhook_id, now_last, now_failing))
            await webhooks.set_delivery_health(changed)
            await session.commit()

    async def release(
        self, claims: Sequence[ClaimedDelivery], *, due_at: datetime, lease: timedelta
    ) -> list[ClaimedDelivery]:
        if not claims:
            return []
        async with self.database.session() as session:
            await session.execute(
                update(DELIVERIES)
                .where(_d.id == bindparam("b_id"), _d.claim_token == bindparam("b_token"))
                .values(next_attempt_at=due_at, claim_token=None, lease_until=None),
                # In id order, the order a webhook's deletion locks them in.
                [
                    {"b_id": c.delivery_id, "b_token": c.claim_token}
                    for c in sorted(claims, key=lambda c: c.delivery_id)
                ],
            )
            # Read after the update, which waited for a deletion holding these rows: a row gone
            # with its webhook was cancelled. (Gone with the webhook still there, another worker
            # claimed it once this lease ran out, and finished it.)
            queued: set[int] = set()
            for part in in_parts([c.delivery_id for c in claims]):
                queued.update(await session.scalars(select(_d.id).where(_d.id.in_(part))))
            gone = [c for c in claims if c.delivery_id not in queued]
            existing = (
                await WebhookRepository(session).existing_ids(c.webhook_id for c in gone)
                if gone
                else set()
            )
            cancelled = [c for c in gone if c.webhook_id not in existing]
            # Unless it was already recorded since the claim: by the deletion (whose time the
            # lease had run out by), or by another worker that took it after this lease.
            recorded = await ResultRepository(session).recorded_since_claimed(
                HeldDelivery(c.customer_id, c.webhook_id, c.delivery_id, c.lease_until - lease)
                for c in cancelled
            )
            await session.commit()
        return [c for c in cancelled if (c.delivery_id, c.attempt) not in recorded]
