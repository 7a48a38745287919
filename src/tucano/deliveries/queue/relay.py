"""The outbox relay of the queue on NATS: due deliveries, committed in the database, announced
on the JetStream stream. A pass marks what it takes with a token of its own under a lease (one
committed transaction) and only then publishes; a delivery whose mark runs out unclaimed (the
relay died before publishing, or the message went unclaimed) is due again and re-published
with a new token, and the old message no longer claims anything (docs/adr/nats-queue.md)."""

from __future__ import annotations

import asyncio
import secrets
import zlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import orjson
from sqlalchemy import or_, select, update

from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.db.repository import in_parts
from tucano.deliveries.queue.sql import DELIVERIES, WEBHOOKS

_d, _w = DELIVERIES.c, WEBHOOKS.c

# Subjects per stream: each receiving host falls in one, so a slow host fills only its shard.
SHARDS = 64
# How long a published delivery waits for a worker's claim before it is published again.
PUBLISHED_LEASE = timedelta(minutes=5)
# Publishes in flight at once, each awaiting the stream's acknowledgement.
PUBLISHING = 256

Publish = Callable[[str, bytes, str], Awaitable[None]]  # subject, message, Nats-Msg-Id


def shard_of(target_url: str | None) -> int:
    """The shard of a receiving host (scheme and authority, as the dispatcher groups them)."""
    parts = urlsplit(target_url or "")
    return zlib.crc32(f"{parts.scheme}://{parts.netloc}".lower().encode()) % SHARDS


def ticket(delivery_id: int, token: str) -> bytes:
    """The message a delivery is announced by: which, and the mark it was published under."""
    return orjson.dumps({"delivery": delivery_id, "token": token})


def read_ticket(data: bytes) -> tuple[int, str] | None:
    try:
        message = orjson.loads(data)
        return int(message["delivery"]), str(message["token"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


class Relay:
    """Moves due deliveries from the database onto the stream, `subject_prefix`.<shard>."""

    def __init__(
        self,
        database: Database,
        publish: Publish,
        *,
        subject_prefix: str,
        lease: timedelta = PUBLISHED_LEASE,
    ) -> None:
        self.database = database
        self.publish = publish
        self.subject_prefix = subject_prefix
        self.lease = lease

    async def relay_due(self, limit: int) -> int:
        """Mark and publish up to `limit` due deliveries that nobody holds; how many."""
        marked = await self.mark_due(limit)
        await self.publish_marked(marked)
        return len(marked)

    async def mark_due(self, limit: int) -> list[tuple[int, int, str, str]]:
        """Committed before anything is published: (delivery, attempt, token, subject) each."""
        now = clock.now()
        token = "r" + secrets.token_hex(15)
        async with self.database.session() as session:
            ids = list(
                await session.scalars(
                    select(_d.id)
                    .where(
                        _d.next_attempt_at <= now,
                        or_(_d.lease_until.is_(None), _d.lease_until <= now),
                    )
                    .order_by(_d.next_attempt_at)
                    .limit(limit)
                    .with_for_update(skip_locked=True)
                )
            )
            rows: list[Any] = []
            for part in in_parts(ids):
                await session.execute(
                    update(DELIVERIES)
                    .where(_d.id.in_(part))
                    .values(lease_until=now + self.lease, claim_token=token, updated_at=now)
                )
                rows += (
                    await session.execute(
                        select(_d.id, _d.attempts, _w.target_url)
                        .select_from(DELIVERIES.outerjoin(WEBHOOKS, _w.id == _d.webhook_id))
                        .where(_d.id.in_(part))
                    )
                ).all()
            await session.commit()
        return [
            (row.id, row.attempts + 1, token, f"{self.subject_prefix}.{shard_of(row.target_url)}")
            for row in rows
        ]

    async def publish_marked(self, marked: list[tuple[int, int, str, str]]) -> None:
        """Publish each marked delivery. Nats-Msg-Id names the delivery, its attempt and its
        mark: a publish sent again after a lost acknowledgement is dropped by the stream."""
        for start in range(0, len(marked), PUBLISHING):
            await asyncio.gather(
                *(
                    self.publish(subject, ticket(delivery_id, token), f"{delivery_id}.{n}.{token}")
                    for delivery_id, n, token, subject in marked[start : start + PUBLISHING]
                )
            )
