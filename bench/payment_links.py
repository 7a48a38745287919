"""Benchmark: payment-link create and read throughput beside a bare route of the same server, and
list and report latency with 100k and 1M links on PostgreSQL.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.payment_links

What runs: `tucano serve --no-worker` in a process of its own on a fresh database, and here an
aiohttp client keeping `--concurrency` requests in flight for `--seconds` per scenario:

- bare: `GET /health/live` of the same server (routing, middleware, JSON; no auth, no database);
- create: `POST /payment-link/v1` with a new x-transaction-id each time;
- read: `GET /payment-link/v1/{uuid}` of links created before.

Then links of one customer are loaded straight into PostgreSQL (spread over a year, a tenth paid)
up to 100k and then 1M, and list and report requests are timed one at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import aiohttp

from bench.api_data import rebuild_day_totals
from bench.served import postgres_url, served
from tucano.db.engines import connect_asyncpg

CUSTOMER_ID = 777


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_text(latencies: list[float]) -> str:
    return f"p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms"


def print_latency_rows(rows: list[tuple[str, str]], width: int) -> None:
    """A table of (scenario, latency_text) rows."""
    print(f"{'scenario':<{width}}  latency")
    print("-" * 80)
    for name, latency in rows:
        print(f"{name:<{width}}  {latency}")


async def hammer(
    call: Callable[[aiohttp.ClientSession], Awaitable[None]], *, seconds: float, concurrency: int
) -> tuple[int, list[float]]:
    """Keep `concurrency` calls in flight for `seconds`; return how many finished, and their ms."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def loop() -> None:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                await call(http)
                latencies.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(loop() for _ in range(concurrency)))
    return len(latencies), latencies


def link_body() -> bytes:
    return json.dumps(
        {
            "payerName": "Maria da Silva",
            "registrationNumber": "52998224725",
            "amount": round(random.uniform(1, 5000), 2),
            "numbersInstallments": 3,
            "expirationDays": 5,
            "userReference": "bench",
        }
    ).encode()


async def load_links(database_url: str, count: int, start_index: int) -> None:
    """`count` links straight into PostgreSQL: creationDate spread evenly over 2026 (a stride
    coprime with the seconds of a year), a tenth paid."""
    connection = await connect_asyncpg(database_url)
    try:
        await connection.execute(
            """
            INSERT INTO payment_links (uuid, customer_id, payer_name, registration_number,
                amount_cents, numbers_installments, description, user_reference, expiration_days,
                verification_token, status, created_at, expires_at, autopay_at, pix_txid)
            SELECT gen_random_uuid(), $1, 'Payer ' || i, lpad((i % 99999999999)::text, 11, '0'),
                100 + (i * 7919) % 500000, 1 + i % 10, NULL, 'ref-' || (i % 1000), 5,
                100000 + i % 900000, CASE WHEN i % 10 = 0 THEN 'PAID' ELSE 'CREATED' END,
                timestamptz '2026-01-01 00:00:00+00' + ((i * 7919) % 31536000) * interval '1 s',
                timestamptz '2026-01-06 00:00:00+00' + ((i * 7919) % 31536000) * interval '1 s',
                NULL, upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 24))
            FROM generate_series($2::bigint, $3::bigint) AS i
            """,
            CUSTOMER_ID,
            start_index,
            start_index + count - 1,
        )
        await connection.execute(
            """
            INSERT INTO payment_link_payments (link_id, customer_id, method, payment_id,
                payment_receipt, installments, amount_cents, installment_cents, paid_at)
            SELECT id, customer_id, 1 + id % 2, 'pay_' || id, 'R' || lpad(id::text, 31, '0'), 1,
                amount_cents, NULL, created_at + interval '1 hour'
            FROM payment_links
            WHERE status = 'PAID' AND customer_id = $1
              AND NOT EXISTS (
                  SELECT 1 FROM payment_link_payments p WHERE p.link_id = payment_links.id)
            """,
            CUSTOMER_ID,
        )
    finally:
        await connection.close()
    await rebuild_day_totals(database_url)
    connection = await connect_asyncpg(database_url)
    try:
        # What autovacuum does on a live database: statistics, and the visibility map that
        # index-only scans need.
        for table in ("payment_links", "payment_link_payments", "payment_link_day_totals"):
            await connection.execute(f"VACUUM ANALYZE {table}")
    finally:
        await connection.close()


async def time_requests(
    base_url: str, token: str, path: str, params: dict[str, str], times: int
) -> list[float]:
    latencies = []
    async with aiohttp.ClientSession() as http:
        for _ in range(times):
            headers = {"Authorization": f"Bearer {token}", "x-transaction-id": str(uuid.uuid4())}
            started = time.perf_counter()
            async with http.get(base_url + path, params=params, headers=headers) as response:
                await response.read()
                assert response.status == 200, await response.text()
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sizes", default="100000,1000000", help="link counts for list/report")
    parser.add_argument("--samples", type=int, default=50, help="timed list/report requests")
    args = parser.parse_args()
    rows: list[tuple[str, str, str, str]] = []
    async with served(postgres_url(), CUSTOMER_ID) as service:
        auth = {"Authorization": f"Bearer {service.token}", "content-type": "application/json"}
        created: list[str] = []

        async def bare(http: aiohttp.ClientSession) -> None:
            async with http.get(service.base_url + "/health/live") as response:
                await response.read()

        async def create(http: aiohttp.ClientSession) -> None:
            headers = {**auth, "x-transaction-id": str(uuid.uuid4())}
            async with http.post(
                service.base_url + "/payment-link/v1", data=link_body(), headers=headers
            ) as response:
                body = await response.json()
                created.append(body["linkPaymentUuid"])

        async def read(http: aiohttp.ClientSession) -> None:
            headers = {**auth, "x-transaction-id": str(uuid.uuid4())}
            link = random.choice(created)
            async with http.get(
                f"{service.base_url}/payment-link/v1/{link}", headers=headers
            ) as response:
                await response.read()

        throughput = {}
        for name, call in (("bare", bare), ("create", create), ("read", read)):
            done, latencies = await hammer(call, seconds=args.seconds, concurrency=args.concurrency)
            throughput[name] = done / args.seconds
            rows.append(
                (
                    f"{name}: {'GET /health/live' if name == 'bare' else name + ' a link'}",
                    f"{throughput[name]:.0f}/s",
                    f"{throughput[name] / throughput['bare']:.0%}",
                    latency_text(latencies),
                )
            )

        loaded = 0
        for size in (int(s) for s in args.sizes.split(",")):
            await load_links(service.database_url, size - loaded, loaded + 1)
            loaded = size
            for label, path, params in (
                (
                    "list, 30 days, page 0",
                    "/payment-link/v1/link-payment",
                    {"startDate": "2026-06-01", "endDate": "2026-06-30"},
                ),
                (
                    "list, whole year, page 0",
                    "/payment-link/v1/link-payment",
                    {"startDate": "2026-01-01", "endDate": "2026-12-31"},
                ),
                (
                    "list, by userReference, year",
                    "/payment-link/v1/link-payment",
                    {"startDate": "2026-01-01", "endDate": "2026-12-31", "userReference": "ref-7"},
                ),
                (
                    "report, 1 day",
                    "/payment-link/v1/report",
                    {"startDate": "2026-06-15", "endDate": "2026-06-15"},
                ),
                (
                    "report, 30 days",
                    "/payment-link/v1/report",
                    {"startDate": "2026-06-01", "endDate": "2026-06-30"},
                ),
            ):
                latencies = await time_requests(
                    service.base_url, service.token, path, params, args.samples
                )
                rows.append(
                    (
                        f"{label} ({size:,} links)",
                        "-",
                        "-",
                        latency_text(latencies),
                    )
                )

    print(f"\nPayment links on PostgreSQL ({os.cpu_count()} CPUs, {args.concurrency} in flight)\n")
    print(f"{'scenario':<48} {'throughput':>11} {'of bare':>8}  latency")
    print("-" * 100)
    for name, rate, share, latency in rows:
        print(f"{name:<48} {rate:>11} {share:>8}  {latency}")


if __name__ == "__main__":
    asyncio.run(main())
