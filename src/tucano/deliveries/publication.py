"""Publications under an API client's Idempotency-Key: one event per key for 24 hours, and the
fingerprint releases before 2026-11-24 stored, still recognised."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tucano import wire
from tucano.brazil.documents import normalize_document
from tucano.clock import clock
from tucano.db import Database
from tucano.deliveries.models import EventIdempotencyKey
from tucano.deliveries.outbox import NewEvent, PublishedEvent, Publisher, publish_events
from tucano.errors import Conflict, ErrorCode
from tucano.webhooks.payloads import published

# How long a publisher's Idempotency-Key is remembered (as a payment link's x-transaction-id).
EVENT_IDEMPOTENCY_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class IdempotentPublication:
    """An Idempotency-Key of an API client, and the fingerprint of the request it came with."""

    client_id: str
    key: str
    fingerprint: str
    # How releases before 2026-11-24 fingerprinted the same request: a key they stored is still
    # replayed for 24 hours after an upgrade, not taken for another request (a 409 would have
    # the publisher send the event again under a new key).
    earlier_fingerprint: str = ""


def publication_fingerprint(event: NewEvent) -> str:
    """The same publication whatever its spelling (10.5 or 10.50, the order of fields)."""
    canonical = wire.dumps(
        {
            "eventType": event.event_type.value,
            "customerId": event.customer_id,
            "payload": published(event.payload),
        },
        sort_keys=True,
    )
    return hashlib.sha256(canonical).hexdigest()


def earlier_publication_fingerprint(event: NewEvent) -> str:
    """publication_fingerprint as releases before 2026-11-24 computed it: every field of the
    payload in the schema's order, as they rewrote it (identifiers as text, documents without
    punctuation, the link's UUID in lower case)."""
    canonical = wire.dumps(
        {
            "eventType": event.event_type.value,
            "customerId": event.customer_id,
            "payload": _as_earlier_releases_wrote(
                event.payload.model_dump(mode="python", by_alias=True)
            ),
        }
    )
    return hashlib.sha256(canonical).hexdigest()


_EARLIER_TEXT_FIELDS = {
    "paymentId",
    "paymentReceipt",
    "creditCardId",
    "identificationTransaction",
    "recurrenceId",
    "transactionId",
    "transferId",
    "txid",
}
_EARLIER_DOCUMENT_FIELDS = {"documentNumber", "cardholderDocument"}


def _as_earlier_releases_wrote(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    written = {}
    for key, item in value.items():
        if key in _EARLIER_TEXT_FIELDS and isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        elif key in _EARLIER_DOCUMENT_FIELDS and isinstance(item, str):
            item = normalize_document(item)
        elif key == "paymentLinkUuid" and isinstance(item, str):
            item = item.lower()
        written[key] = _as_earlier_releases_wrote(item)
    return written


async def publish_event_once(
    database: Database,
    event: NewEvent,
    *,
    idempotency: IdempotentPublication,
    answer: Callable[[PublishedEvent], bytes],
    publish: Publisher | None = None,
) -> tuple[bytes, bool]:
    """Publish `event` unless this Idempotency-Key was used in the last 24 hours: (the answer,
    whether it is a replay). The answer of the first publication is kept with the key, in the
    event's transaction; the same key with another request is a 409. One event per key, even
    when requests with the same key race (the loser's transaction, event and all, is undone).
    `publish` stores the event in the session (publish_events unless the caller adds to it)."""
    async with database.session() as session:
        replay = await _stored_publication(session, idempotency)
        if replay is not None:
            return replay, True
        (published,) = await (publish or publish_events)(session, [event])
        body = answer(published)
        now = clock.now()
        await session.execute(
            delete(EventIdempotencyKey).where(  # the same key, used more than 24 hours ago
                EventIdempotencyKey.client_id == idempotency.client_id,
                EventIdempotencyKey.key == idempotency.key,
                # Never a key a racing request has just stored: that one makes ours a replay.
                EventIdempotencyKey.created_at <= now - EVENT_IDEMPOTENCY_WINDOW,
            )
        )
        session.add(
            EventIdempotencyKey(
                client_id=idempotency.client_id,
                key=idempotency.key,
                request_hash=idempotency.fingerprint,
                response=body.decode(),
                created_at=now,
            )
        )
        try:
            await session.commit()
        except IntegrityError:
            await session.rollback()
            replay = await _stored_publication(session, idempotency)
            if replay is None:
                raise
            return replay, True
    return body, False


async def _stored_publication(
    session: AsyncSession, idempotency: IdempotentPublication
) -> bytes | None:
    stored = await session.scalar(
        select(EventIdempotencyKey).where(
            EventIdempotencyKey.client_id == idempotency.client_id,
            EventIdempotencyKey.key == idempotency.key,
            EventIdempotencyKey.created_at > clock.now() - EVENT_IDEMPOTENCY_WINDOW,
        )
    )
    if stored is None:
        return None
    if stored.request_hash not in (idempotency.fingerprint, idempotency.earlier_fingerprint):
        raise Conflict(
            ErrorCode.IDEMPOTENCY_KEY_CONFLICT,
            "this Idempotency-Key published a different event in the last 24 hours; send a "
            "new key for a new event",
        )
    return stored.response.encode()


async def prune_event_idempotency_keys(
    session: AsyncSession, *, now: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of keys older than their window (the runner calls again while there are
    more: one DELETE of millions held SQLite's write lock past other writers' patience)."""
    k = EventIdempotencyKey
    expired = (
        select(k.client_id, k.key)
        .where(k.created_at <= now - EVENT_IDEMPOTENCY_WINDOW)
        .order_by(k.created_at)
        .limit(batch_size)
    )
    result = await session.execute(delete(k).where(tuple_(k.client_id, k.key).in_(expired)))
    return int(getattr(result, "rowcount", 0) or 0)
