"""The queue on NATS JetStream beyond the contract suite: end to end with TUCANO_QUEUE=nats (a
service and its worker, real receivers, a cluster of three), and the relay's crash."""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from sqlalchemy import text
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.conftest import migrated_database
from tests.support.deliveries import eventually, publish, register, results_for
from tests.support.nats_cluster import NatsCluster
from tests.support.queue import LEASE, RelayingNatsQueue, add_webhook, claim, count
from tests.support.queue import publish as publish_in_database
from tests.support.receivers import Receiver, failing_then_ok
from tests.support.service import Merchant, RunningService, new_customer_id, start_service
from tests.support.settings import (
    DELIVERY_SETTINGS,
    POSTGRES_URL,
    TEST_SECRET_STORE,
    make_settings,
)
from tucano.auth.tokens import Scope
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries.models import Delivery
from tucano.deliveries.queue import NatsQueue, queue_for
from tucano.deliveries.queue import nats as nats_module
from tucano.deliveries.queue.backend import ClaimedDelivery
from tucano.deliveries.queue.nats import CONSUMER, RELAY_NAME, STREAM, servers_of
from tucano.deliveries.queue.relay import PUBLISHED_LEASE, Relay
from tucano.webhooks.secret_store import WebhookSecretStore

pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")


@pytest.fixture(scope="module")
async def nats_service(
    nats_cluster: NatsCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningService]:
    """The service with its worker on a database of its own, its queue on the cluster."""
    async with migrated_database("postgresql", tmp_path_factory.mktemp("db")) as database:
        settings = make_settings(
            database.url, **DELIVERY_SETTINGS, queue="nats", nats_url=nats_cluster.url
        )
        running = await start_service(settings, database, background=True)
        yield running
        await running.stop()


async def test_with_tucano_queue_nats_each_event_arrives_signed_once_through_the_stream(
    nats_service: RunningService, nats_cluster: NatsCluster
) -> None:
    receiver = await Receiver().start()
    try:
        merchant = await nats_service.merchant()
        publisher = await nats_service.merchant(scopes=[Scope.EVENTS_PUBLISH])
        one = await register(merchant, receiver, "/one")
        other = await register(merchant, receiver, "/other")
        events = [(await publish(publisher, merchant.customer_id))["eventId"] for _ in range(5)]

        for webhook, path in ((one, "/one"), (other, "/other")):
            arrived = await receiver.wait_for(path, 5)
            for request in arrived:
                StandardWebhook(webhook["secret"]).verify(request.body, request.headers)
            assert sorted(r.headers["webhook-id"] for r in arrived) == sorted(events)
        await asyncio.sleep(0.5)  # nothing more comes: each arrived once
        assert len(receiver.at("/one")) == len(receiver.at("/other")) == 5
    finally:
        await receiver.stop()
    # They came by the stream: its consumer handed out (at least) the ten deliveries.
    client = await nats.connect(servers=servers_of(nats_cluster.url))
    try:
        consumer = await client.jetstream().consumer_info(STREAM, CONSUMER)
    finally:
        await client.close()
    assert consumer.delivered.stream_seq >= 10
    assert consumer.num_pending == 0 and consumer.num_ack_pending == 0
    # /metrics shows the stream's lag, as the cluster counts it.
    page = (await merchant.get("/metrics")).text
    assert "\ntucano_queue_stream_pending_messages 0.0\n" in page
    assert "\ntucano_queue_stream_unacknowledged_messages 0.0\n" in page


async def test_with_tucano_queue_nats_a_retry_after_a_500_keeps_the_schedule(
    nats_service: RunningService,
) -> None:
    receiver = await Receiver().start()
    try:
        receiver.behaviours["/flaky"] = failing_then_ok(1, status=500)
        merchant: Merchant = await nats_service.merchant()
        publisher = await nats_service.merchant(scopes=[Scope.EVENTS_PUBLISH])
        webhook = await register(merchant, receiver, "/flaky")
        await publish(publisher, merchant.customer_id)

        requests = await receiver.wait_for("/flaky", 2)
        (gap,) = [b.at - a.at for a, b in itertools.pairwise(requests)]
        assert 0.25 <= gap < 1.5  # the schedule's 300 ms +- 10% jitter, plus the relay's turn
        records = await results_for(merchant, 2, webhookId=webhook["webhookId"])
        assert [(r["attempt"], r["status"]) for r in records] == [
            (2, "SUCCESS"),
            (1, "PENDING_RETRY"),
        ]
        await asyncio.sleep(0.5)
        assert len(receiver.at("/flaky")) == 2
    finally:
        await receiver.stop()


@pytest.fixture
async def nats_queue(nats_cluster: NatsCluster, tmp_path: Path) -> AsyncIterator[NatsQueue]:
    name = uuid.uuid4().hex[:12]
    async with migrated_database("postgresql", tmp_path) as database:
        queue = RelayingNatsQueue(
            database,
            servers_of(nats_cluster.url),
            stream=f"T{name}",
            subject_prefix=f"t{name}",
        )
        yield queue
        await queue.close()


class PublishFailed(Exception):
    pass


async def test_a_relay_that_dies_before_publishing_loses_nothing(nats_queue: NatsQueue) -> None:
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    await publish_in_database(database, customer)
    with clock.freeze() as frozen:
        # Killed between its commit and its publish: marked, never announced.
        assert len(await nats_queue.relay.mark_due(100)) == 1
        assert await claim(nats_queue, customer) == []
        frozen.advance(PUBLISHED_LEASE)
        # The mark runs out: the next relay pass (here, the claim's) announces it again.
        (claimed,) = await claim(nats_queue, customer)
        assert claimed.attempt == 1
        assert await claim(nats_queue, customer) == []


async def test_a_publish_that_fails_leaves_the_delivery_due_at_once(nats_queue: NatsQueue) -> None:
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    await publish_in_database(database, customer)

    async def fails(subject: str, data: bytes, message_id: str) -> None:
        raise PublishFailed

    failing = Relay(database, fails, subject_prefix=nats_queue.subject_prefix)
    with clock.freeze():
        with pytest.raises(PublishFailed):
            await failing.relay_due(100)
        # Unmarked: the next pass announces it without waiting for the mark to run out.
        (claimed,) = await claim(nats_queue, customer)
        assert claimed.attempt == 1


async def test_a_delivery_announced_twice_is_claimed_once(nats_queue: NatsQueue) -> None:
    """A relay that published, then died before anyone claimed (or whose message waited past
    its mark): announced again under a new mark, and the first message claims nothing."""
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    await publish_in_database(database, customer)
    with clock.freeze() as frozen:
        assert await nats_queue.relay.relay_due(100) == 1
        frozen.advance(PUBLISHED_LEASE)
        assert await nats_queue.relay.relay_due(100) == 1  # two messages now
        claims = await claim(nats_queue, customer)
        claims += await claim(nats_queue, customer)
    assert len(claims) == 1
    assert await count(database, Delivery, customer) == 1


def test_tucano_queue_nats_picks_the_nats_back_end(nats_cluster: NatsCluster) -> None:
    settings = make_settings(POSTGRES_URL, queue="nats", nats_url=nats_cluster.url)
    queue = queue_for(Database(POSTGRES_URL), settings)
    assert isinstance(queue, NatsQueue)
    assert queue.servers == servers_of(nats_cluster.url) and len(queue.servers) == 3
    assert (queue.stream, queue.subject_prefix) == (STREAM, "tucano.deliveries")
    assert not isinstance(queue_for(Database(POSTGRES_URL), make_settings(POSTGRES_URL)), NatsQueue)
    # Two deployments on one cluster: each its own stream and subjects.
    staging = make_settings(
        POSTGRES_URL, queue="nats", nats_url=nats_cluster.url, nats_stream="TUCANO_STAGING"
    )
    other = queue_for(Database(POSTGRES_URL), staging)
    assert isinstance(other, NatsQueue)
    assert (other.stream, other.subject_prefix) == ("TUCANO_STAGING", "tucano.staging")


async def test_a_host_the_worker_has_no_room_for_is_left_on_the_stream_for_later(
    nats_queue: NatsQueue,
) -> None:
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    await publish_in_database(database, customer)
    full = await nats_queue.claim(
        secret_store=TEST_SECRET_STORE,
        limit=10,
        lease=LEASE,
        exclude_hosts=["https://hooks.example.com"],
    )
    assert full.deliveries == []
    # Not claimed meanwhile: it comes back from the stream, for a worker with room.
    held: list[ClaimedDelivery] = []

    async def claimed() -> bool:
        held.extend(await claim(nats_queue, customer))
        return bool(held)

    await eventually(claimed, timeout=10, what="the left-out delivery coming back")
    assert len(held) == 1 and held[0].attempt == 1


def _beside(queue: NatsQueue) -> NatsQueue:
    """Another worker's queue on the same stream (its claims do not relay)."""
    return NatsQueue(
        queue.database,
        queue.servers,
        stream=queue.stream,
        subject_prefix=queue.subject_prefix,
        poll_seconds=0.1,
    )


async def _relay_leaders(database: Database) -> int:
    """Relays leading on `database` (each Tucano database has its own)."""
    async with database.read_session() as session:
        return int(
            await session.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"
                    " AND datname = current_database()"
                ),
                {"name": f"{RELAY_NAME} {os.getpid()}"},
            )
            or 0
        )


async def test_one_relay_leads_and_a_standby_takes_over_when_it_stops(
    nats_queue: NatsQueue,
) -> None:
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    first, second, worker = _beside(nats_queue), _beside(nats_queue), _beside(nats_queue)
    assert await claim(worker, customer) == []  # the stream made before the relays start
    stop_first, stop_second, due = asyncio.Event(), asyncio.Event(), asyncio.Event()
    relays = [
        asyncio.create_task(first.serve(stop_first, due)),
        asyncio.create_task(second.serve(stop_second, due)),
    ]
    try:
        held: list[ClaimedDelivery] = []

        async def claimed(n: int) -> bool:
            held.extend(await claim(worker, customer))
            return len(held) == n

        await publish_in_database(database, customer)
        # The worker's claims do not relay: the leading relay announced it.
        await eventually(lambda: claimed(1), timeout=10, what="the first delivery relayed")
        assert await _relay_leaders(database) == 1
        stop_first.set()
        await relays[0]
        await publish_in_database(database, customer)
        await eventually(lambda: claimed(2), timeout=10, what="the standby relaying")
        assert await _relay_leaders(database) == 1
        assert len({c.delivery_id for c in held}) == 2
    finally:
        stop_first.set()
        stop_second.set()
        await asyncio.gather(*relays)
        for queue in (first, second, worker):
            await queue.close()


async def test_the_relay_keeps_no_more_than_its_ahead_unpulled_on_the_stream(
    nats_queue: NatsQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nats_module, "AHEAD", 3)
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    for _ in range(5):
        await publish_in_database(database, customer)
    relaying = _beside(nats_queue)
    assert await claim(relaying, customer) == []  # the stream made
    stop, due = asyncio.Event(), asyncio.Event()
    relay = asyncio.create_task(relaying.serve(stop, due))
    try:
        await eventually(
            lambda: _pending_is(relaying, 3), timeout=10, what="three messages on the stream"
        )
        await asyncio.sleep(0.5)  # passes meanwhile relay nothing more
        assert (await relaying.lag()).pending == 3
        # As workers pull, the relay tops the stream up to what is left.
        assert len(await claim(relaying, customer)) == 3
        await eventually(lambda: _pending_is(relaying, 2), timeout=10, what="the last two")
    finally:
        stop.set()
        await relay
        await relaying.close()


async def _pending_is(queue: NatsQueue, pending: int) -> bool:
    return (await queue.lag()).pending == pending


async def test_a_delivery_whose_secrets_do_not_open_leaves_no_message_held(
    nats_queue: NatsQueue,
) -> None:
    """Left under the claim's lease, as the database queue leaves it; its message is settled,
    so the stream does not count it unacknowledged for the consumer's ack wait."""
    database = nats_queue.database
    customer = new_customer_id()
    await add_webhook(database, customer)
    await publish_in_database(database, customer)
    wrong_key = WebhookSecretStore(b"another-key-that-did-not-seal-these-secrets-01")
    with clock.freeze() as frozen:
        claimed = await nats_queue.claim(secret_store=wrong_key, limit=10, lease=LEASE)
        assert claimed.deliveries == []

        async def settled() -> bool:
            return await nats_queue.lag() == (0, 0)

        await eventually(settled, timeout=5, what="its message acknowledged")
        frozen.advance(LEASE)
        # Its lease over, it is announced again, and a store that opens it claims it.
        (again,) = await claim(nats_queue, customer)
    assert again.attempt == 1
