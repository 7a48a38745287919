"""Benchmark: where a delivery's CPU goes, the HTTP and the engine measured apart.

    .venv/bin/python -m bench.engine_cost                     # SQLite, and PostgreSQL if set
    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.engine_cost

`bench.deliveries` measures the whole: the worker delivering to local receivers beside a bare
aiohttp client posting to the same receivers. This one takes the whole apart, CPU time of this
process per operation (all its threads; so on SQLite the database's own work is included):

- HTTP: a bare aiohttp client and Tucano's `Sender` (the SSRF-checking resolver, timeouts, the
  1 KiB body cap) each POST the same signed body to the same receivers, 64 in flight.
- engine: the delivery worker drains a burst already in the outbox (claims, signs, records,
  retires), with sending replaced by an answer of 200 at once: everything but the HTTP.
- worker without a database: the delivery worker POSTs a burst to the receivers for real, its
  deliveries claimed from the database before the clock starts and handed out from memory, its
  outcomes dropped: everything but the database, the upper bound of what any database work
  leaves the worker (the bare client is the ceiling of `bench.deliveries`).

If the parts added up, a delivery would cost `engine + Sender`; `bench.deliveries` shows what a
delivery costs when they run together. The difference is what they cost each other (caches,
fewer answers per turn of the event loop, the GIL handed between the loop and SQLite's thread).
Placement as in `bench.deliveries`: this process on the first CPU, the receivers on the last.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
from sqlalchemy import func, select
from tests.support.databases import drop_scratch_database

from bench.deliveries import (
    CONCURRENCY,
    Placement,
    Receivers,
    databases_to_run,
    engine_database,
    fresh_database,
    payloads,
    publish,
    run,
)
from tucano.core import json_codec
from tucano.deliveries.models import DeliveryResult, ResultStatus
from tucano.deliveries.queue import queue_for
from tucano.deliveries.queue.backend import Claim, ClaimedDelivery, Outcome
from tucano.deliveries.worker.loop import DeliveryWorker
from tucano.deliveries.worker.sender import Sender
from tucano.events.samples import sample_payload
from tucano.events.types import EventType
from tucano.runtime import tune_garbage_collector
from tucano.webhooks.secret_store import load_secret_store
from tucano.webhooks.service import new_signing_secret
from tucano.webhooks.signing import delivery_headers

WEBHOOKS = 4
Headers = dict[str, str]


def to(url: str, body: bytes) -> ClaimedDelivery:
    """A claimed delivery of `body` to `url`, for the Sender alone."""
    now = datetime.now(UTC)
    return ClaimedDelivery(
        delivery_id=1,
        claim_token="bench",
        event_id="evt_bench",
        event_type="PIX_OUTBOUND",
        customer_id=1,
        webhook_id=1,
        attempt=1,
        payload=body,
        lease_until=now + timedelta(hours=1),
        event_created_at=now,
        target_url=url,
        webhook_active=True,
        subscribed_to="PIX_OUTBOUND",
        signing_secrets=(),
    )


async def cpu_per_post(
    post: Callable[[str], Awaitable[object]], urls: list[str], posts: int
) -> float:
    """CPU microseconds of this process per POST, `CONCURRENCY` in flight."""
    queue = [urls[i % len(urls)] for i in range(posts)]

    async def post_all() -> None:
        while queue:
            await post(queue.pop())

    started = time.process_time()
    await asyncio.gather(*(post_all() for _ in range(CONCURRENCY)))
    return (time.process_time() - started) / posts * 1e6


async def bare_client_cost(urls: list[str], posts: int, body: bytes, headers: Headers) -> float:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def post(url: str) -> None:
            async with http.post(url, data=body, headers=headers) as response:
                await response.read()

        return await cpu_per_post(post, urls, posts)


async def sender_cost(urls: list[str], posts: int, body: bytes, headers: Headers) -> float:
    sender = Sender(
        allowed_networks=[ipaddress.ip_network("127.0.0.0/8")],
        allow_http=True,
        timeout=15,
        max_connections=CONCURRENCY,
    )
    try:
        now = datetime.now(UTC)

        async def post(url: str) -> None:
            await sender.send(to(url, body), headers=headers, now=now)

        return await cpu_per_post(post, urls, posts)
    finally:
        await sender.close()


async def http_costs(receivers: Receivers, posts: int) -> dict[str, float]:
    body = json_codec.dumps(sample_payload(EventType.PIX_OUTBOUND))
    headers = delivery_headers(
        secrets=[new_signing_secret()],
        message_id="evt_bench",
        timestamp=int(time.time()),
        body=body,
        event_type="PIX_OUTBOUND",
        user_agent="bench",
    )
    urls = receivers.urls()
    costs: dict[str, list[float]] = {"bare aiohttp client": [], "Tucano's Sender": []}
    for _ in range(2):  # alternated, so that neither gets the quieter moment
        costs["bare aiohttp client"].append(await bare_client_cost(urls, posts, body, headers))
        costs["Tucano's Sender"].append(await sender_cost(urls, posts, body, headers))
    return {name: min(values) for name, values in costs.items()}


async def engine_cost(url: str, events: int) -> tuple[float, float]:
    """CPU microseconds per delivery of the worker draining `events` x WEBHOOKS deliveries with
    every POST answered 200 at once, and the rate it drained them at."""
    targets = [f"http://127.0.0.1:{9000 + port}/hook" for port in range(WEBHOOKS)]
    database, settings = await engine_database(url, targets)
    burst = payloads(events)
    for start in range(0, events, 100):
        await publish(database, burst[start : start + 100], {})

    async def answered(_sender: object, claimed: ClaimedDelivery, **kwargs: Any) -> Outcome:
        await asyncio.sleep(0)  # a turn of the event loop, as an answer would take
        return Outcome(
            claimed, ResultStatus.SUCCESS, claimed.target_url or "", 200, "ok", None, 1,
            kwargs["now"], None,
        )  # fmt: skip

    expected = events * WEBHOOKS
    stop = asyncio.Event()
    with mock.patch.object(Sender, "send", answered):
        started, cpu = time.perf_counter(), time.process_time()
        worker = asyncio.create_task(DeliveryWorker(database, settings).run(stop))
        while True:
            await asyncio.sleep(0.05)
            async with database.session() as session:
                done = await session.scalar(select(func.count()).select_from(DeliveryResult))
            if (done or 0) >= expected:
                break
        cpu, seconds = time.process_time() - cpu, time.perf_counter() - started
        stop.set()
        await worker
    await database.dispose()
    return cpu / expected * 1e6, expected / seconds


async def worker_without_database_cost(url: str, receivers: Receivers, events: int) -> float:
    """CPU microseconds per delivery of the worker sending `events` x WEBHOOKS deliveries to
    the receivers, with claims answered from memory (claimed beforehand, as the real claim
    returns them) and outcomes not recorded."""
    database, settings = await engine_database(url, receivers.urls())
    burst = payloads(events)
    for start in range(0, events, 100):
        await publish(database, burst[start : start + 100], {})
    expected = events * WEBHOOKS
    claimed = (
        await queue_for(database).claim(
            secret_store=await load_secret_store(settings, database),
            limit=expected,
            lease=timedelta(hours=1),
        )
    ).deliveries

    class FromMemory:
        """Claims answered from `claimed`, outcomes dropped."""

        async def claim(self, *, limit: int, **_filters: object) -> Claim:
            await asyncio.sleep(0)  # a turn of the event loop, as a statement would take
            taken = claimed[:limit]
            del claimed[:limit]
            return Claim(taken, more_due=bool(claimed))

        async def record(self, _outcomes: object) -> None:
            return None

        async def release(self, _claims: object, **_kwargs: object) -> list[ClaimedDelivery]:
            return []

    stop = asyncio.Event()
    async with aiohttp.ClientSession() as http:
        await receivers.arrivals(http)  # what earlier measurements left there
        cpu = time.process_time()
        worker = asyncio.create_task(
            DeliveryWorker(database, settings, queue=FromMemory()).run(stop)
        )
        arrived = await receivers.wait_for(http, expected, within=300)
        cpu = time.process_time() - cpu
        stop.set()
        await worker
    await database.dispose()
    assert len(arrived) == expected, f"{len(arrived)} of {expected} deliveries arrived"
    return cpu / expected * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000, help="events in the engine's burst")
    parser.add_argument("--posts", type=int, default=20000, help="POSTs per HTTP measurement")
    parser.add_argument(
        "--databases", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql"
    )
    args = parser.parse_args()
    pg_url, kinds = databases_to_run(args.databases)
    placement = Placement.choose(pin=True)
    placement.pin(os.getpid(), placement.measured)
    tune_garbage_collector()  # as `tucano serve` and `tucano worker` do

    receivers = Receivers(WEBHOOKS, placement)
    engine: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        try:
            http = await http_costs(receivers, args.posts)
            url = await fresh_database("sqlite", None, Path(workdir))
            http["worker without a database, one delivery"] = await worker_without_database_cost(
                url, receivers, args.events
            )
        finally:
            receivers.stop()
        for kind in kinds:
            url = await fresh_database(kind, pg_url, Path(workdir))
            try:
                engine[kind] = await engine_cost(url, args.events)
            finally:
                if kind == "postgresql" and pg_url:
                    await drop_scratch_database(pg_url, url)

    print(
        f"\nCPU of this process per operation ({os.cpu_count()} CPUs, {placement.describe()}, "
        f"{CONCURRENCY} in flight); the engine's burst is {args.events} events x {WEBHOOKS} "
        "webhooks with every POST answered at once\n"
    )
    print(f"{'part':<50} {'CPU us':>7} {'per second':>11}")
    print("-" * 70)
    for name, cost in http.items():
        label = name if name.startswith("worker") else f"HTTP: {name} (one POST)"
        print(f"{label:<50} {cost:>7.1f} {'-':>11}")
    for kind, (cost, rate) in engine.items():
        label = f"engine without HTTP, {kind} (one delivery)"
        print(f"{label:<50} {cost:>7.1f} {rate:>11.0f}")
    if "postgresql" not in kinds:
        print("\n(PostgreSQL skipped: set TUCANO_BENCH_DATABASE_URL to include it)")


if __name__ == "__main__":
    run(main)
