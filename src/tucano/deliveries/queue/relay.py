"""The outbox relay of the queue on NATS: due deliveries, committed in the database, announced
on the JetStream stream. A pass marks what it takes with a token of its own under a lease (one
statement, tickets.py) and only then publishes; a delivery whose mark runs out unclaimed (the
relay died before publishing, or the message went unclaimed) is due again and re-published
with a new token, and the old message no longer claims anything (docs/adr/nats-queue.md). One
process relays at a time (db/leadership.py); the others stand by."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import zlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import NamedTuple
from urllib.parse import urlsplit

import orjson
import structlog
from sqlalchemy import update

from tucano.core.clock import clock
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.db.leadership import Leadership
from tucano.db.repository import in_parts
from tucano.deliveries.queue import tickets
from tucano.deliveries.queue.backend import retries_share
from tucano.deliveries.queue.sql import DELIVERIES

log = structlog.get_logger("tucano.deliveries")

_d = DELIVERIES.c

# Subjects per stream: each receiving host falls in one, so a slow host fills only its shard.
SHARDS = 64
# How long a published delivery waits for a worker's claim before it is published again (the
# worker's own lease, TUCANO_DELIVERY_LEASE_SECONDS, when the settings give it): a relay or a
# worker killed between the mark and the claim delays a delivery by as much.
PUBLISHED_LEASE = timedelta(seconds=60)
# Publishes in flight at once, each awaiting the stream's acknowledgement.
PUBLISHING = 256
# The most one pass marks and publishes.
RELAY_BATCH = 1000
# A standby tries to lead this often; a pass that failed is tried again as much later.
STANDBY_SECONDS = 1.0

Publish = Callable[[str, bytes, str], Awaitable[None]]  # subject, message, Nats-Msg-Id
Room = Callable[[], Awaitable[int]]  # how many more the stream should be given now


def host_of(target_url: str | None) -> str:
    """A receiving host as the dispatcher groups them: scheme and authority, in lower case."""
    parts = urlsplit(target_url or "")
    return f"{parts.scheme}://{parts.netloc}".lower()


def shard_of(target_url: str | None) -> int:
    """The shard of a receiving host."""
    return zlib.crc32(host_of(target_url).encode()) % SHARDS


class Ticket(NamedTuple):
    """What a message says: which delivery, the mark it was published under, and its webhook
    and host when marked, so that a worker leaves out what it has no room for unread."""

    delivery: int
    mark: str
    webhook: int | None = None
    host: str = ""

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "delivery": self.delivery,
                "token": self.mark,
                "webhook": self.webhook,
                "host": self.host,
            }
        )


def ticket(delivery_id: int, token: str) -> bytes:
    """The message announcing a delivery under a mark (its webhook and host unsaid)."""
    return Ticket(delivery_id, token).encode()


def read_ticket(data: bytes) -> Ticket | None:
    try:
        message = orjson.loads(data)
        webhook = message.get("webhook")
        return Ticket(
            int(message["delivery"]),
            str(message["token"]),
            None if webhook is None else int(webhook),
            str(message.get("host") or ""),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None


class Marked(NamedTuple):
    """A delivery the relay marked: its ticket, the attempt it is for and its subject."""

    ticket: Ticket
    attempt: int
    subject: str


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

    async def mark_due(self, limit: int) -> list[Marked]:
        """Committed before anything is published. Retries take up to their share, as in a
        claim of the database queue, so that a failing receiver's retries cannot crowd new
        events off the stream."""
        now = clock.now()
        mark = "r" + secrets.token_hex(15)
        rows = await tickets.mark_due(
            self.database,
            limit=limit,
            retries=retries_share(limit),
            now=now,
            until=now + self.lease,
            mark=mark,
        )
        return [
            Marked(
                Ticket(row["id"], mark, row["webhook_id"], host_of(row["target_url"])),
                row["attempts"] + 1,
                f"{self.subject_prefix}.{shard_of(row['target_url'])}",
            )
            for row in rows
        ]

    async def publish_marked(self, marked: list[Marked]) -> None:
        """Publish each marked delivery. Nats-Msg-Id names the delivery, its attempt and its
        mark: a publish sent again after a lost acknowledgement is dropped by the stream. When
        a publish fails, what is left of the pass is unmarked, due again at once rather than
        when its mark runs out (best effort: the mark runs out anyway)."""
        for start in range(0, len(marked), PUBLISHING):
            part = marked[start : start + PUBLISHING]
            outcomes = await asyncio.gather(
                *(
                    self.publish(
                        m.subject,
                        m.ticket.encode(),
                        f"{m.ticket.delivery}.{m.attempt}.{m.ticket.mark}",
                    )
                    for m in part
                ),
                return_exceptions=True,
            )
            failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
            if failed is not None:
                with contextlib.suppress(Exception):
                    await self.unmark(
                        [m.ticket.delivery for m in marked[start:]], marked[0].ticket.mark
                    )
                raise failed

    async def unmark(self, delivery_ids: list[int], token: str) -> None:
        """Due again now, where the mark `token` still stands."""
        now = clock.now()
        async with self.database.session() as session:
            for part in in_parts(delivery_ids):
                await session.execute(
                    update(DELIVERIES)
                    .where(_d.id.in_(part), _d.claim_token == token)
                    .values(lease_until=None, claim_token=None, updated_at=now)
                )
            await session.commit()

    async def run(
        self,
        stop: asyncio.Event,
        due: asyncio.Event,
        *,
        leadership: Leadership,
        room: Room,
        poll_seconds: float,
    ) -> None:
        """Relay until `stop` while this process leads: a pass whenever `due` is set, and every
        `poll_seconds` for retries that come due with time, each pass as much as the stream
        has room for. A standby tries to lead every STANDBY_SECONDS."""
        leading = False
        while not stop.is_set():
            wait = STANDBY_SECONDS
            try:
                if await leadership.lead():
                    if not leading:
                        log.info("nats_relay_leading")
                    leading, wait = True, poll_seconds
                    due.clear()
                    while not stop.is_set():
                        limit = min(RELAY_BATCH, await room())
                        if limit <= 0 or await self.relay_due(limit) < limit:
                            break
                else:
                    leading = False
            except Exception as exc:  # the database or NATS down: tried again, logged each time
                log.warning("nats_relay_failed", error=exception_summary(exc)[:300])
                wait = STANDBY_SECONDS
            # A standby waits out its time: a pass it may not run is no reason to wake.
            waits = [asyncio.ensure_future(e.wait()) for e in ((stop, due) if leading else (stop,))]
            try:
                await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        await leadership.step_down()
