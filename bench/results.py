"""Benchmark: the delivery results list (A6) with 100k and 1M results of one customer on
PostgreSQL, beside the server's bare route.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.results

What runs: `tucano serve --no-worker` in a process of its own on a fresh database. Results of one
customer (five webhooks, three event types, a twentieth failed) are loaded straight into
PostgreSQL over the last 90 days, with the hour counts the service keeps beside them, and then
`GET /webhook/v1/list/results` is timed one request at a time for each filter, beside
`GET /health/live` of the same server (the floor: routing, middleware, JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import os

from bench.payment_links import latency_text, print_latency_rows, time_requests
from bench.served import postgres_url, served
from tucano.db.engines import connect_asyncpg

CUSTOMER_ID = 778
DAYS = 90


async def load_results(database_url: str, count: int, start_index: int) -> None:
    """`count` results straight into PostgreSQL, spread evenly over the last DAYS days, and the
    hour counts of them (as the service appends them, folded)."""
    connection = await connect_asyncpg(database_url)
    try:
        await connection.execute(
            """
            INSERT INTO delivery_results (delivery_id, customer_id, webhook_id, event_id,
                event_type, target_url, attempt, status, http_status, response_body,
                error_message, duration_ms, attempted_at, next_attempt_at)
            SELECT i, $1, 1 + i % 5, 'evt_' || i,
                (ARRAY['PIX_OUTBOUND', 'PIX_QR_INBOUND', 'CARD_CHARGEBACK'])[1 + i % 3],
                'https://merchant.example/hooks', 1,
                CASE WHEN i % 20 = 0 THEN 'EXHAUSTED' ELSE 'SUCCESS' END,
                CASE WHEN i % 20 = 0 THEN 500 ELSE 200 END, 'ok', NULL, 12,
                now() - interval '1 day' * $4 + (i * 7919 % $3) * (interval '1 day' * $4 / $3),
                NULL
            FROM generate_series($2::bigint, $2::bigint + $3::bigint - 1) AS i
            """,
            CUSTOMER_ID,
            start_index,
            count,
            DAYS,
        )
        await connection.execute(
            """
            INSERT INTO delivery_result_counts (customer_id, hour, webhook_id, event_type, status,
                result_count, folded)
            SELECT customer_id, floor(extract(epoch FROM attempted_at) / 3600)::bigint,
                webhook_id, event_type, status, count(*), false
            FROM delivery_results WHERE delivery_id >= $1 AND customer_id = $2
            GROUP BY 1, 2, 3, 4, 5
            """,
            start_index,
            CUSTOMER_ID,
        )
        # Fold, as the service's periodic job does.
        await connection.execute(
            """
            WITH gone AS (DELETE FROM delivery_result_counts WHERE customer_id = $1
                          RETURNING customer_id, hour, webhook_id, event_type, status,
                                    result_count)
            INSERT INTO delivery_result_counts (customer_id, hour, webhook_id, event_type, status,
                result_count, folded)
            SELECT customer_id, hour, webhook_id, event_type, status, sum(result_count), true
              FROM gone GROUP BY 1, 2, 3, 4, 5
            """,
            CUSTOMER_ID,
        )
        await connection.execute("VACUUM ANALYZE delivery_results")
        await connection.execute("VACUUM ANALYZE delivery_result_counts")
    finally:
        await connection.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="result counts")
    parser.add_argument("--samples", type=int, default=50, help="timed requests per scenario")
    args = parser.parse_args()
    rows: list[tuple[str, str]] = []
    async with served(postgres_url(), CUSTOMER_ID) as service:
        loaded = 0
        for size in (int(s) for s in args.sizes.split(",")):
            await load_results(service.database_url, size - loaded, loaded + 1)
            loaded = size
            floor = await time_requests(
                service.base_url, service.token, "/health/live", {}, args.samples
            )
            rows.append((f"bare: GET /health/live ({size:,} results)", latency_text(floor)))
            for label, params in (
                ("all, page 0", {}),
                ("all, page 500", {"page": "500"}),
                ("by eventType", {"eventType": "PIX_QR_INBOUND"}),
                ("by webhookId", {"webhookId": "3"}),
                ("by status (a twentieth)", {"status": "EXHAUSTED"}),
                ("30 whole days", {"startDate": "2026-10-01", "endDate": "2026-10-30"}),
                (
                    "30 days cut mid-hour",
                    {
                        "startDate": "2026-10-01T10:30:00.000Z",
                        "endDate": "2026-10-31T12:45:00.000Z",
                    },
                ),
            ):
                latencies = await time_requests(
                    service.base_url,
                    service.token,
                    "/webhook/v1/list/results",
                    params,
                    args.samples,
                )
                rows.append((f"{label} ({size:,} results)", latency_text(latencies)))

    print(f"\nResults list (A6) on PostgreSQL ({os.cpu_count()} CPUs, one request at a time)\n")
    print_latency_rows(rows, 48)


if __name__ == "__main__":
    asyncio.run(main())
