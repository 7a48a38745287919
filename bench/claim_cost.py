"""What finding due deliveries costs PostgreSQL as workers hold more of them, in each queue: the
database queue's claim steps over every held delivery at the head of the due index, in every
worker's claim; the queue on NATS steps over them once per relay pass (up to 1,000), and each
worker's claim reads its tickets' rows by primary key.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.claim_cost       # held 0 to 32,768, about two minutes

What runs, in this process on a fresh database (no HTTP, no sending): 60,000 deliveries due, then
for each `--held` count H that many claimed under a long lease (what H / 512 workers hold at
their full prefetch: 8 x 64), and then, timed, `--claims` claims of 64 of each kind:

- database: `PostgresQueue.claim` (the tuned claim of `TUCANO_QUEUE=database`);
- nats, relay pass: the relay's mark of 1,000 (`Relay.mark_due`, publishing left out, and the
  mark undone after, untimed), per delivery, so it reads against a claim's per delivery;
- nats, claim by ticket: a worker's claim of 64 from the stream (`NatsQueue.claim`: the pull and
  the rows by primary key), after the relay published them, on a cluster of three started here.

What each timed claim took is recorded as sent (not timed), so H stays as it is. Figures are
milliseconds per claim and microseconds per delivery, the median of the claims; the floor beside
them is `SELECT 1` on the same pool.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text
from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.nats_cluster import started_cluster
from tests.support.queue import add_webhook, publish, record_success
from tests.support.settings import TEST_SECRET_STORE

from bench.deliveries import run
from bench.served import postgres_url
from tucano.db.database import Database
from tucano.deliveries.queue.backend import ClaimedDelivery
from tucano.deliveries.queue.nats import NatsQueue, servers_of
from tucano.deliveries.queue.postgres import PostgresQueue
from tucano.migrations import upgrade

CUSTOMER_ID = 9191
WEBHOOKS = 50  # each event fans out to all of them
BATCH = 64  # a worker's claim (its concurrency)
LONG = timedelta(hours=1)


async def timed(call: Callable[[], Awaitable[int]], claims: int) -> list[tuple[float, int]]:
    """(seconds, deliveries) of each of `claims` calls."""
    samples = []
    for _ in range(claims):
        started = time.perf_counter()
        taken = await call()
        samples.append((time.perf_counter() - started, taken))
    return samples


def row(label: str, samples: list[tuple[float, int]]) -> str:
    per_call = statistics.median(s for s, _ in samples) * 1000
    per_delivery = statistics.median(s / max(n, 1) for s, n in samples) * 1e6
    taken = statistics.median(n for _, n in samples)
    return f"{label:<44} {taken:>8.0f} {per_call:>10.2f} {per_delivery:>12.1f}"


async def measure(database: Database, nats_url: str, held_counts: list[int], claims: int) -> None:
    for _ in range(WEBHOOKS):
        await add_webhook(database, CUSTOMER_ID)
    for _ in range(60_000 // WEBHOOKS):
        await publish(database, CUSTOMER_ID)
    queue = PostgresQueue(database)
    nats_queue = NatsQueue(database, servers_of(nats_url))
    held: list[ClaimedDelivery] = []
    timings: list[tuple[float, int]] = []  # the timed part alone of each relay pass or claim

    async def database_claim() -> int:
        claimed = await queue.claim(secret_store=TEST_SECRET_STORE, limit=BATCH, lease=LONG)
        await record_success(queue, claimed.deliveries)
        return len(claimed.deliveries)

    async def relay_pass() -> int:
        started = time.perf_counter()
        marked = await nats_queue.relay.mark_due(1000)
        took = time.perf_counter() - started
        await nats_queue.relay.unmark([m.ticket.delivery for m in marked], marked[0].ticket.mark)
        timings.append((took, len(marked)))
        return len(marked)

    async def ticket_claim() -> int:
        await nats_queue.relay.relay_due(BATCH)
        started = time.perf_counter()
        claimed = await nats_queue.claim(secret_store=TEST_SECRET_STORE, limit=BATCH, lease=LONG)
        took = time.perf_counter() - started
        await record_success(nats_queue, claimed.deliveries)
        timings.append((took, len(claimed.deliveries)))
        return len(claimed.deliveries)

    async def floor() -> int:
        async with database.session() as session:
            await session.execute(text("SELECT 1"))
        return 1

    print(
        f"{'claim, with H deliveries held':<44} {'taken':>8} {'ms/claim':>10} {'us/delivery':>12}"
    )
    print("-" * 77)
    for held_count in held_counts:
        while len(held) < held_count:
            more = await queue.claim(
                secret_store=TEST_SECRET_STORE, limit=min(1000, held_count - len(held)), lease=LONG
            )
            held += more.deliveries
        print(row(f"floor: SELECT 1 (H = {held_count:,})", await timed(floor, claims)))
        print(row(f"database: claim of {BATCH}", await timed(database_claim, claims)))
        timings.clear()
        await timed(relay_pass, claims)
        print(row("nats: relay pass, a mark of 1,000", timings))
        timings.clear()
        await timed(ticket_claim, claims)
        print(row(f"nats: claim by ticket of {BATCH}", timings))
        print()
    await nats_queue.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", default="0,2048,8192,32768", help="held counts")
    parser.add_argument("--claims", type=int, default=15, help="timed claims per row")
    arguments = parser.parse_args()
    held_counts = [int(h) for h in arguments.held.split(",")]
    with (
        tempfile.TemporaryDirectory(prefix="tucano_claims_") as root,
        started_cluster(Path(root) / "nats", name="tucano-bench") as cluster,
    ):
        url = await create_scratch_database(postgres_url(), prefix="tucano_bench")
        database = Database(url)
        try:
            await asyncio.to_thread(upgrade, url)
            await measure(database, cluster.url, held_counts, arguments.claims)
        finally:
            await database.dispose()
            await drop_scratch_database(postgres_url(), url)


if __name__ == "__main__":
    run(main)
