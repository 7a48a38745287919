"""The delivery queue on NATS JetStream: the database stays the record and the outbox; a relay
(relay.py) announces each committed due delivery on a replicated stream, sharded by receiving
host, and workers pull from one durable consumer. A message is a ticket, not the delivery: it
claims its delivery in the database only while the delivery still carries the relay's mark, so
a stale or duplicated message claims nothing. A retry waits in the database for its time and
is announced again when due (docs/adr/nats-queue.md says why). Recording and giving back are
the database back end's; the messages of what they settle are then acknowledged."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

import nats
import structlog
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import BadRequestError, NotFoundError

from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.db.leadership import Leadership
from tucano.deliveries.queue import tickets
from tucano.deliveries.queue.backend import Claim, ClaimedDelivery, Outcome, claimed_delivery
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.deliveries.queue.relay import PUBLISHED_LEASE, Relay, Ticket, read_ticket
from tucano.deliveries.queue.sql import SqlQueue
from tucano.webhooks.secret_store import WebhookSecretStore

log = structlog.get_logger("tucano.deliveries")

STREAM = "TUCANO_DELIVERIES"
SUBJECT_PREFIX = "tucano.deliveries"
CONSUMER = "workers"
REPLICAS = 3
# How long a pull waits for its batch: nats-py waits for a full batch until then, so a longer
# wait holds back what came first (measured beside a hanging receiver, docs/performance.md).
FETCH_SECONDS = 0.05
# A message for a host or webhook the worker has no room for comes back this much later.
LEFT_FOR_LATER_SECONDS = 1.0
# A message unacknowledged this long is handed out again (and then claims nothing unless its
# mark still stands); longer than any attempt's lease.
ACK_WAIT_SECONDS = 600.0
# The relay keeps at most this many messages on the stream that no worker has pulled yet, so
# that what waits is marked in the database only shortly before a worker takes it.
AHEAD = 10_000
# The key of the PostgreSQL advisory lock whose holder relays (any fixed number).
RELAY_LOCK_KEY = 7_340_040
RELAY_NAME = "tucano-relay"


class StreamLag(NamedTuple):
    """The consumer's view of the stream: messages no worker has pulled yet, and messages
    pulled and not yet acknowledged (in flight, or waiting out a delay)."""

    pending: int
    unacknowledged: int


async def read_stream_lag(servers: Sequence[str], *, stream: str = STREAM) -> StreamLag:
    """The stream's lag, read on a connection of its own (for /metrics, in any process)."""
    client = await nats.connect(
        servers=list(servers), name="tucano-metrics", allow_reconnect=False, connect_timeout=1
    )
    try:
        info = await client.jetstream().consumer_info(stream, CONSUMER, timeout=1)
        return StreamLag(info.num_pending or 0, info.num_ack_pending or 0)
    finally:
        await client.close()


def subject_prefix_of(stream: str) -> str:
    """The subjects' prefix of a stream: `TUCANO_DELIVERIES` has `tucano.deliveries`."""
    return "tucano." + stream.lower().removeprefix("tucano_")


def servers_of(url: str) -> list[str]:
    return [s.strip() for s in url.split(",") if s.strip()]


class NatsQueue:
    """QueueBackend on NATS JetStream over the database's own back end."""

    def __init__(
        self,
        database: Database,
        servers: Sequence[str],
        *,
        stream: str = STREAM,
        subject_prefix: str = SUBJECT_PREFIX,
        replicas: int = REPLICAS,
        poll_seconds: float = 1.0,
        mark_lease: timedelta = PUBLISHED_LEASE,
    ) -> None:
        self.database = database
        self.poll_seconds = poll_seconds  # how often the relay looks for retries come due
        self.servers = list(servers)
        self.stream = stream
        self.subject_prefix = subject_prefix
        self.replicas = replicas
        self.rows: SqlQueue = (
            PostgresQueue(database) if database.dialect == "postgresql" else SqlQueue(database)
        )
        self.relay = Relay(database, self._publish, subject_prefix=subject_prefix, lease=mark_lease)
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self._pull: JetStreamContext.PullSubscription | None = None
        self._connecting = asyncio.Lock()
        # The messages of what this process holds, by (delivery, claim token).
        self._messages: dict[tuple[int, str], Msg] = {}

    async def _connected(self) -> JetStreamContext.PullSubscription:
        async with self._connecting:
            if self._pull is None:
                client = await nats.connect(servers=self.servers, name="tucano-worker")
                try:
                    self._js, self._pull = await self._subscribed(client.jetstream())
                except BaseException:
                    await client.close()  # the next claim connects afresh
                    raise
                self._client = client
            return self._pull

    async def _subscribed(
        self, js: JetStreamContext
    ) -> tuple[JetStreamContext, JetStreamContext.PullSubscription]:
        """The stream (made if missing) and this queue's pull on its durable consumer."""
        try:
            await js.stream_info(self.stream)
        except NotFoundError:
            try:
                await js.add_stream(
                    name=self.stream,
                    subjects=[f"{self.subject_prefix}.*"],
                    num_replicas=self.replicas,
                    storage=api.StorageType.FILE,
                    retention=api.RetentionPolicy.WORK_QUEUE,
                )
            except BadRequestError:  # another process made it meanwhile (name in use)
                await js.stream_info(self.stream)
        pull = await js.pull_subscribe(
            f"{self.subject_prefix}.*",
            durable=CONSUMER,
            stream=self.stream,
            config=api.ConsumerConfig(
                ack_policy=api.AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_SECONDS, max_ack_pending=-1
            ),
        )
        return js, pull

    async def _publish(self, subject: str, data: bytes, message_id: str) -> None:
        await self._connected()
        assert self._js is not None
        await self._js.publish(
            subject, data, stream=self.stream, headers={"Nats-Msg-Id": message_id}
        )

    async def serve(self, stop: asyncio.Event, due: asyncio.Event) -> None:
        """The relay, while this process leads it (one process at a time, db/leadership.py)."""
        leadership = Leadership(self.database.url, key=RELAY_LOCK_KEY, name=RELAY_NAME)
        await self.relay.run(
            stop, due, leadership=leadership, room=self._room, poll_seconds=self.poll_seconds
        )

    async def _room(self) -> int:
        return AHEAD - (await self.lag()).pending

    async def lag(self) -> StreamLag:
        """The stream's lag, as its consumer counts it."""
        await self._connected()
        assert self._js is not None
        info = await self._js.consumer_info(self.stream, CONSUMER)
        return StreamLag(info.num_pending or 0, info.num_ack_pending or 0)

    async def close(self) -> None:
        if self._client is not None:
            # Closed, not drained: a held message left unacknowledged claims nothing later.
            try:
                await self._client.flush(timeout=2)
            except Exception as exc:  # the acknowledgements lost are redelivered, and dropped
                log.warning("nats_flush_failed", error=str(exc))
            await self._client.close()
            self._client = self._js = self._pull = None

    async def claim(
        self,
        *,
        secret_store: WebhookSecretStore,
        limit: int,
        lease: timedelta,
        exclude_webhooks: Sequence[int] = (),
        exclude_hosts: Sequence[str] = (),
    ) -> Claim:
        pull = await self._connected()
        try:
            messages = await pull.fetch(limit, timeout=FETCH_SECONDS)
        except TimeoutError:  # nothing on the stream (asyncio's, or nats-py's subclass of it)
            messages = []
        left_out_webhooks, left_out_hosts = set(exclude_webhooks), set(exclude_hosts)
        held: list[tuple[Ticket, Msg]] = []
        for message in messages:
            read = read_ticket(message.data)
            if read is None:
                await message.term()
            elif read.webhook in left_out_webhooks or read.host in left_out_hosts:
                # For a worker with room, without reading its row.
                await message.nak(delay=LEFT_FOR_LATER_SECONDS)
            else:
                held.append((read, message))
        now = clock.now()
        token = secrets.token_hex(16)
        until = now + lease
        rows = await tickets.claim_tickets(
            self.database,
            [(ticket.delivery, ticket.mark) for ticket, _ in held],
            now=now,
            until=until,
            token=token,
        )
        claimed = {row["delivery_id"]: row for row in rows}
        deliveries = []
        for ticket, message in held:
            row = claimed.pop(ticket.delivery, None)
            if row is None:
                # A stale ticket (the delivery moved on without it), or a second one for a
                # delivery claimed by the first: either way, settled.
                await message.ack()
                continue
            delivery = claimed_delivery(
                row, token=token, lease_until=until, secret_store=secret_store, now=now
            )
            if delivery is None:
                # Left under this claim's lease (logged): when it runs out the relay announces
                # it again, so this message has done its part.
                await message.ack()
            else:
                self._messages[(delivery.delivery_id, token)] = message
                deliveries.append(delivery)
        return Claim(deliveries, more_due=len(messages) >= limit)

    async def _acknowledge(self, claims: Sequence[ClaimedDelivery]) -> None:
        for c in claims:
            message = self._messages.pop((c.delivery_id, c.claim_token), None)
            if message is not None:
                try:
                    await message.ack()
                except Exception as exc:  # redelivered later, it claims nothing
                    log.warning("nats_ack_failed", deliveryId=c.delivery_id, error=str(exc))

    async def record(self, outcomes: Sequence[Outcome]) -> None:
        await self.rows.record(outcomes)
        await self._acknowledge([o.claimed for o in outcomes])

    async def release(
        self, claims: Sequence[ClaimedDelivery], *, due_at: datetime, lease: timedelta
    ) -> list[ClaimedDelivery]:
        cancelled = await self.rows.release(claims, due_at=due_at, lease=lease)
        await self._acknowledge(claims)
        return cancelled
