"""Hosts that hang, more of them than a worker's senders can hold at their cap: a healthy host is
still served at once. A service of its own (a small pool, a long timeout) on a database of its
own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.deliveries import eventually, publish, register
from tests.support.receivers import Receiver, hanging
from tests.support.service import RunningService, start_service
from tests.support.settings import DELIVERY_SETTINGS, make_settings
from tucano.auth.tokens import Scope
from tucano.db.database import Database

CONCURRENCY = 8
PER_TARGET = 2


@pytest.fixture(scope="module")
async def small_pool_service(private_database: Database) -> AsyncIterator[RunningService]:
    settings = make_settings(
        private_database.url,
        **{
            **DELIVERY_SETTINGS,
            "delivery_concurrency": CONCURRENCY,
            "delivery_concurrency_per_target": PER_TARGET,
            "delivery_timeout_seconds": 20,  # the hanging attempts outlast the test
            "delivery_lease_seconds": 60,
            "delivery_slow_after_seconds": 0.3,
            "webhook_deactivate_after": "1h",
            # One customer registers 200 webhooks below, above the default cap of 100.
            "max_webhooks_per_customer": 200,
        },
    )
    running = await start_service(settings, private_database, background=True)
    yield running
    await running.stop()


async def test_many_hanging_hosts_neither_take_every_sender_nor_all_the_room_to_claim(
    small_pool_service: RunningService, receiver: Receiver
) -> None:
    service = small_pool_service
    publisher = await service.merchant(scopes=[Scope.EVENTS_PUBLISH])
    owner = await service.merchant()
    healthy_owner = await service.merchant()
    hosts = CONCURRENCY // PER_TARGET + 1  # at their cap, together more than all the senders
    # Each answers after 5 s, well within the delivery timeout (20 s): long enough for the test.
    hanging_receivers = [Receiver(behaviours={"/hang": hanging(5)}) for _ in range(hosts)]
    for hanging_receiver in hanging_receivers:
        await hanging_receiver.start()
    try:
        await register(healthy_owner, receiver, "/healthy")
        for hanging_receiver in hanging_receivers:
            await register(owner, hanging_receiver, "/hang")
        # Enough that what the worker claims for them fills its whole prefetch (8 x concurrency).
        for _ in range(16):
            await publish(publisher, owner.customer_id)

        def open_now() -> int:
            return sum(r.open_now.get("/hang", 0) for r in hanging_receivers)

        async def every_cap_taken() -> bool:
            return open_now() == hosts * PER_TARGET

        # Each hanging host gets its whole cap at once, beyond the pool of CONCURRENCY senders.
        await eventually(every_cap_taken, timeout=5, what="every hanging host at its cap")
        started = time.monotonic()
        await publish(publisher, healthy_owner.customer_id)
        await receiver.wait_for("/healthy", 1, timeout=5)
        # Not once the hanging attempts end: at once.
        assert time.monotonic() - started < 1.5
        assert open_now() == hosts * PER_TARGET
        assert all(r.most_open["/hang"] == PER_TARGET for r in hanging_receivers)
    finally:
        await asyncio.gather(*(r.stop() for r in hanging_receivers))


async def test_a_hanging_host_with_more_webhooks_than_the_room_to_claim_holds_back_no_one(
    small_pool_service: RunningService, receiver: Receiver
) -> None:
    # A host behind hundreds of webhooks (every customer of one integration platform, say):
    # left out of claims by the webhooks of it the worker had seen, it filled the whole room
    # to claim with deliveries it takes one a timeout, and every other host waited.
    service = small_pool_service
    publisher = await service.merchant(scopes=[Scope.EVENTS_PUBLISH])
    owner = await service.merchant()
    healthy_owner = await service.merchant()
    hanging_receiver = Receiver(behaviours={f"/hang/{i}": hanging(5) for i in range(200)})
    await hanging_receiver.start()
    try:
        await register(healthy_owner, receiver, "/healthy")
        for i in range(200):  # more webhooks than the worker may hold deliveries (24 x 8)
            await register(owner, hanging_receiver, f"/hang/{i}")
        await publish(publisher, owner.customer_id)

        async def at_its_cap() -> bool:
            return sum(hanging_receiver.open_now.values()) == PER_TARGET

        await eventually(at_its_cap, timeout=5, what="the hanging host at its cap")
        started = time.monotonic()
        await publish(publisher, healthy_owner.customer_id)
        await receiver.wait_for("/healthy", 1, timeout=5)
        assert time.monotonic() - started < 2
        assert sum(hanging_receiver.open_now.values()) == PER_TARGET
    finally:
        await hanging_receiver.stop()
