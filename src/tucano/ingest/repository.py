"""Every statement on the Idempotency-Keys of event publications."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table

from tucano.core.errors import Conflict, ErrorCode
from tucano.db.idempotency import IdempotencyStore
from tucano.db.repository import Repository
from tucano.ingest.models import EventIdempotencyKey

# How long a publisher's Idempotency-Key is remembered (as a payment link's x-transaction-id).
EVENT_IDEMPOTENCY_WINDOW = timedelta(hours=24)


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


class PublicationKeyRepository(Repository[EventIdempotencyKey]):
    model = EventIdempotencyKey

    async def find(
        self, *, client_id: str, key: str, fingerprints: Collection[str], now: datetime
    ) -> bytes | None:
        """The answer kept for this key if it is live; the conflict if it came with another
        request; None if it is new."""
        return await PUBLICATION_KEYS.find(
            self.session, owner=client_id, key=key, fingerprints=fingerprints, now=now
        )

    async def remember(
        self, *, client_id: str, key: str, fingerprint: str, answer: bytes, now: datetime
    ) -> bool:
        """Keep `answer` for this key; False when a concurrent request with it got there first."""
        return await PUBLICATION_KEYS.remember(
            self.session, owner=client_id, key=key, fingerprint=fingerprint, answer=answer, now=now
        )

    async def prune(self, *, now: datetime, batch_size: int) -> int:
        return await PUBLICATION_KEYS.prune(self.session, now=now, batch_size=batch_size)
