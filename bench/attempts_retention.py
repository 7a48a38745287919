"""The attempts table's cost on PostgreSQL, for the capacity model (docs/capacity.md): what an
attempt's row takes on disk and in WAL, and what retention costs as the service prunes today
(batched DELETEs) beside the ceiling a table partitioned by time would have (a DROP of the
partition holding the same rows).

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.attempts_retention            # 400,000 attempts

What runs: `tucano serve --no-worker` on a fresh database (it migrates), then `--rows` attempts
of one customer loaded straight into `delivery_results` over the last 90 days, with their hour
counts (bench/results.py). Figures: the table's size with its indexes per row; the WAL the load
wrote per row; the service's own prune (`deliveries.service.prune_history`, its batches of
5,000, each committed, as the periodic job runs it) of the older half, in rows a second and WAL
per row; and, for the same rows copied into a table of their own with the same indexes, the
time and WAL of dropping it. WAL is read from `pg_current_wal_lsn()` on the shared server, so
run it while nothing else writes there.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from typing import Any

from bench.deliveries import run
from bench.results import CUSTOMER_ID, DAYS, load_results
from bench.served import postgres_url, served
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.db.engines import connect_asyncpg
from tucano.deliveries import service as deliveries

WAL = "SELECT pg_current_wal_lsn()"


async def wal_since(connection: Any, start: str) -> int:
    """WAL bytes written on the server since `start` (an LSN)."""
    return int(await connection.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)", start))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    arguments = parser.parse_args()
    rows = arguments.rows
    async with served(postgres_url(), CUSTOMER_ID) as service:
        connection = await connect_asyncpg(service.database_url)
        try:
            start = await connection.fetchval(WAL)
            await load_results(service.database_url, rows, 1)
            load_wal = await wal_since(connection, start)
            size = await connection.fetchval("SELECT pg_total_relation_size('delivery_results')")
            cutoff = clock.now() - timedelta(days=DAYS / 2)
            # The same rows, in a table of their own: the partition a time-partitioned table
            # would drop.
            await connection.execute(
                "CREATE TABLE retention_partition (LIKE delivery_results INCLUDING ALL)"
            )
            await connection.execute(
                "INSERT INTO retention_partition SELECT * FROM delivery_results"
                " WHERE attempted_at < $1",
                cutoff,
            )
            await connection.execute("CHECKPOINT")
            database = Database(service.database_url)
            pruned, started, start = 0, time.perf_counter(), await connection.fetchval(WAL)
            try:
                while True:
                    async with database.session() as session:
                        done = await deliveries.prune_history(session, older_than=cutoff)
                        await session.commit()
                    if not done:
                        break
                    pruned += done
            finally:
                await database.dispose()
            prune_seconds, prune_wal = (
                time.perf_counter() - started,
                await wal_since(connection, start),
            )
            await connection.execute("CHECKPOINT")
            started, start = time.perf_counter(), await connection.fetchval(WAL)
            await connection.execute("DROP TABLE retention_partition")
            drop_seconds, drop_wal = (
                time.perf_counter() - started,
                await wal_since(connection, start),
            )
        finally:
            await connection.close()
    print(f"{rows:,} attempts of one customer over {DAYS} days; the older half pruned")
    print(f"{'figure':<52} {'value':>14}")
    print(f"{'table with its indexes, bytes per attempt':<52} {size / rows:>14,.0f}")
    print(f"{'WAL written by the load, bytes per attempt':<52} {load_wal / rows:>14,.0f}")
    print(f"{'prune by DELETE (today): rows pruned':<52} {pruned:>14,}")
    print(f"{'prune by DELETE: rows per second':<52} {pruned / prune_seconds:>14,.0f}")
    print(f"{'prune by DELETE: WAL bytes per row':<52} {prune_wal / max(pruned, 1):>14,.0f}")
    print(f"{'drop of a partition of the same rows: seconds':<52} {drop_seconds:>14.3f}")
    print(f"{'drop of a partition: WAL bytes per row':<52} {drop_wal / max(pruned, 1):>14,.2f}")


if __name__ == "__main__":
    run(main)
