"""Publishing the events that the provider's other systems raise: one request's events (one, or
a batch) stored with their deliveries in one transaction, with the links the Pix payments among
them pay (pix.py). With an Idempotency-Key, a request is published once and the same request
again within 24 hours gets the first answer; the keys are kept per API client."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.deliveries.service import NewEvent, PublishedEvent
from tucano.events.payloads import PixQrInbound, published
from tucano.ingest.pix import pays_a_link, settle_pix_payment
from tucano.ingest.repository import PublicationKeyRepository


@dataclass(frozen=True)
class IdempotentPublication:
    """An Idempotency-Key of an API client, and the fingerprint of the request it came with."""

    client_id: str
    key: str
    fingerprint: str
    # The same request as an earlier release fingerprinted it (see earlier_fingerprints).
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


async def publish_events_paying_links(
    session: AsyncSession, events: Sequence[NewEvent]
) -> list[PublishedEvent]:
    """deliveries.service.publish_events, and the links the Pix payments among them pay, in the
    caller's transaction."""
    published_events = await deliveries.publish_events(session, events)
    for event, stored in zip(events, published_events, strict=True):
        if pays_a_link(event):
            assert isinstance(event.payload, PixQrInbound)
            await settle_pix_payment(
                session, customer_id=event.customer_id, payment=event.payload, event_id=stored.id
            )
    return published_events


async def publish(database: Database, events: Sequence[NewEvent]) -> list[PublishedEvent]:
    """Publish one request's events (no Idempotency-Key), committed together."""
    if not any(pays_a_link(event) for event in events):
        return await deliveries.publish_events_alone(database, events)
    async with database.session() as session:
        published_events = await publish_events_paying_links(session, events)
        await session.commit()
    return published_events


async def publish_once(
    database: Database,
    events: Sequence[NewEvent],
    *,
    idempotency: IdempotentPublication,
    answer: Callable[[list[PublishedEvent]], bytes],
) -> tuple[bytes, bool]:
    """Publish `events` unless this Idempotency-Key was used in the last 24 hours: (the answer,
    whether it is a replay). The answer of the first publication is kept with the key, in the
    events' transaction; the same key with another request is a 409. One publication per key,
    even when requests with the same key race (the loser's transaction, events and all, is
    undone)."""
    async with database.session() as session:
        keys = PublicationKeyRepository(session)
        replay = await _find(keys, idempotency)
        if replay is not None:
            return replay, True
        body = answer(await publish_events_paying_links(session, events))
        if await keys.remember(
            client_id=idempotency.client_id,
            key=idempotency.key,
            fingerprint=idempotency.fingerprint,
            answer=body,
            now=clock.now(),
        ):
            await session.commit()
            return body, False
        # A racing request with this key got there first: answer as it did.
        await session.rollback()
        replay = await _find(keys, idempotency)
    if replay is not None:
        return replay, True
    # Its key expired in between: a new request after all.
    return await publish_once(database, events, idempotency=idempotency, answer=answer)


async def _find(keys: PublicationKeyRepository, idempotency: IdempotentPublication) -> bytes | None:
    return await keys.find(
        client_id=idempotency.client_id,
        key=idempotency.key,
        fingerprints=idempotency.fingerprints,
        now=clock.now(),
    )


async def prune_publication_keys(
    session: AsyncSession, *, now: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of keys older than their window (a periodic job)."""
    return await PublicationKeyRepository(session).prune(now=now, batch_size=batch_size)
