"""Idempotent publication: an event (POST /internal/v1/events) or a batch of them (POST
/internal/v1/events/batch) published with an Idempotency-Key is published once, and the same
request again within 24 hours gets the first answer. The keys are kept per API client in the
idempotency store."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import Conflict, ErrorCode
from tucano.core.idempotency import IdempotencyStore
from tucano.db.database import Database
from tucano.deliveries.models import EventIdempotencyKey
from tucano.deliveries.outbox import NewEvent, PublishedEvent, publish_events
from tucano.events.payloads import published

# What stores events in a session: publish_events, or a flow that does more in the same
# transaction (flows.publish_events_paying_links).
Publisher = Callable[[AsyncSession, Sequence[NewEvent]], Awaitable[list[PublishedEvent]]]


# How long a publisher's Idempotency-Key is remembered (as a payment link's x-transaction-id).
EVENT_IDEMPOTENCY_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class IdempotentPublication:
    """An Idempotency-Key of an API client, and the fingerprint of the request it came with."""

    client_id: str
    key: str
    fingerprint: str
    # The same request as an earlier release fingerprinted it (see compat_2026_11_24).
    earlier_fingerprint: str = ""

    @property
    def fingerprints(self) -> tuple[str, ...]:
        return (self.fingerprint, self.earlier_fingerprint)


def publication_fingerprint(event: NewEvent) -> str:
    """The same publication whatever its spelling (10.5 or 10.50, the order of fields)."""
    return hashlib.sha256(_canonical(event)).hexdigest()


def batch_fingerprint(events: Sequence[NewEvent]) -> str:
    """publication_fingerprint of a batch: the same events in the same order. Never equal to a
    single event's, so a key of one cannot replay as the other."""
    canonical = b"batch:" + b",".join(_canonical(event) for event in events)
    return hashlib.sha256(canonical).hexdigest()


def _canonical(event: NewEvent) -> bytes:
    return json_codec.dumps(
        {
            "eventType": event.event_type.value,
            "customerId": event.customer_id,
            "payload": published(event.payload),
        },
        sort_keys=True,
    )


def publication_conflict() -> Conflict:
    return Conflict(
        ErrorCode.IDEMPOTENCY_KEY_CONFLICT,
        "this Idempotency-Key published a different event in the last 24 hours; send a "
        "new key for a new event",
    )


PUBLICATION_KEYS = IdempotencyStore(
    table=cast(Table, EventIdempotencyKey.__table__),
    owner="client_id",
    window=EVENT_IDEMPOTENCY_WINDOW,
    conflict=publication_conflict,
)


async def publish_events_once(
    database: Database,
    events: Sequence[NewEvent],
    *,
    idempotency: IdempotentPublication,
    answer: Callable[[list[PublishedEvent]], bytes],
    publish: Publisher | None = None,
) -> tuple[bytes, bool]:
    """Publish `events` (one request's: one event, or a batch) unless this Idempotency-Key was
    used in the last 24 hours: (the answer, whether it is a replay). The answer of the first
    publication is kept with the key, in the events' transaction; the same key with another
    request is a 409. One publication per key, even when requests with the same key race (the
    loser's transaction, events and all, is undone). `publish` stores the events in the session
    (publish_events unless the caller adds to it)."""
    async with database.session() as session:
        replay = await _find(session, idempotency)
        if replay is not None:
            return replay, True
        published = await (publish or publish_events)(session, events)
        body = answer(published)
        remembered = await PUBLICATION_KEYS.remember(
            session,
            owner=idempotency.client_id,
            key=idempotency.key,
            fingerprint=idempotency.fingerprint,
            answer=body,
            now=clock.now(),
        )
        if remembered:
            await session.commit()
            return body, False
        # A racing request with this key got there first: answer as it did.
        await session.rollback()
        replay = await _find(session, idempotency)
    if replay is not None:
        return replay, True
    # Its key expired in between: a new request after all.
    return await publish_events_once(
        database, events, idempotency=idempotency, answer=answer, publish=publish
    )


async def _find(session: AsyncSession, idempotency: IdempotentPublication) -> bytes | None:
    return await PUBLICATION_KEYS.find(
        session,
        owner=idempotency.client_id,
        key=idempotency.key,
        fingerprints=idempotency.fingerprints,
        now=clock.now(),
    )


async def prune_event_idempotency_keys(
    session: AsyncSession, *, now: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of keys older than their window (the runner calls again while there are
    more)."""
    return await PUBLICATION_KEYS.prune(session, now=now, batch_size=batch_size)
