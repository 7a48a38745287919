"""Benchmark: what a scrape of /metrics costs the database, the delivery backlog query
(deliveries.backlog), with 0 to 1M deliveries due on PostgreSQL, beside `SELECT 1`.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.backlog

What runs: a fresh database migrated to head; deliveries loaded straight into it (a tenth of them
retries, all due, spread over the last hour), `VACUUM ANALYZE` as autovacuum would; then, one at
a time, `--samples` backlog reads and as many `SELECT 1` on the same read engine (the ceiling: a
round trip that reads nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from sqlalchemy import text
from tests.support.databases import create_scratch_database, drop_scratch_database

from bench.payment_links import latency_text, print_latency_rows
from bench.served import postgres_url
from tucano.db.database import Database
from tucano.db.engines import connect_asyncpg
from tucano.deliveries.service import delivery_backlog
from tucano.migrations import upgrade


async def load_due(database_url: str, count: int, start_index: int) -> None:
    connection = await connect_asyncpg(database_url)
    try:
        if start_index == 0:
            await connection.execute(
                """
                INSERT INTO webhooks (id, customer_id, target_url, event_type, is_active, secret,
                    created_at, updated_at)
                VALUES (1, 1, 'https://merchant.example/hooks', 'PIX_OUTBOUND', true, '',
                    now(), now());
                INSERT INTO events (id, customer_id, event_type, payload, created_at)
                VALUES ('evt_bench', 1, 'PIX_OUTBOUND', '{}', now());
                """
            )
        await connection.execute(
            """
            INSERT INTO deliveries (event_id, webhook_id, customer_id, attempts, next_attempt_at,
                created_at, updated_at)
            SELECT 'evt_bench', 1, 1, CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END,
                now() - interval '1 hour' * random(), now(), now()
            FROM generate_series($1::bigint, $1::bigint + $2::bigint - 1) AS i
            """,
            start_index,
            count,
        )
        await connection.execute("VACUUM ANALYZE deliveries")
    finally:
        await connection.close()


async def timed(call: Callable[[], Awaitable[object]], samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        started = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,10000,100000,1000000", help="deliveries due")
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    base = postgres_url()
    database_url = await create_scratch_database(base, prefix="tucano_bench")
    rows = []
    try:
        await asyncio.to_thread(upgrade, database_url)
        database = Database(database_url)

        async def select_one() -> None:
            async with database.read_session() as session:
                await session.execute(text("SELECT 1"))

        try:
            loaded = 0
            for size in (int(s) for s in args.sizes.split(",")):
                if size > loaded:
                    await load_due(database_url, size - loaded, loaded)
                    loaded = size
                backlog = await delivery_backlog(database)
                assert backlog.due == size, backlog
                await timed(lambda: delivery_backlog(database), 3)  # warm the cache
                rows.append(
                    (
                        f"backlog read, {size:,} due",
                        latency_text(await timed(lambda: delivery_backlog(database), args.samples)),
                    )
                )
                rows.append(
                    (
                        f"ceiling: SELECT 1, {size:,} due",
                        latency_text(await timed(select_one, args.samples)),
                    )
                )
        finally:
            await database.dispose()
    finally:
        await drop_scratch_database(base, database_url)
    print_latency_rows(rows, 40)


if __name__ == "__main__":
    asyncio.run(main())
