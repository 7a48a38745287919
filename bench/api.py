"""Benchmark: the cost of one API request, on SQLite and PostgreSQL, beside a bare route and
beside the same statements straight through the driver, in the same run (issue 28).

    .venv/bin/python -m bench.api [--database sqlite|postgresql] [--seconds 8] [--rounds 3]

(PostgreSQL: TUCANO_BENCH_DATABASE_URL, default postgresql+asyncpg://postgres@127.0.0.1:5432/
test_benchapi; a scratch database is made beside it and dropped after.) Needs wrk
(`apt-get install -y wrk`); exits 2 without it.

What runs, per database: `tucano serve --no-worker` (one process, rate limit out of the way) on
a fresh database with 10 webhooks of the merchant and ~30k links created today (the list's
window), and two ceilings on uvicorn with the settings `tucano serve` runs it with (its event
loop, httptools, one process, no access log), each a process of its own (bench/api_driver.py):

- bare: a FastAPI app with one GET route returning a small JSON: the ratio base;
- driver: FastAPI routes doing Tucano's statements straight through the driver: what the
  database costs, apart from the framework's and Tucano's own code.

wrk (one thread, `--connections` 64) drives each operation for `--rounds` rounds of `--seconds`,
bare, driver and Tucano in turn within each round; the table shows medians over rounds, and the
server's CPU time (utime + stime from /proc) per request. A round with any answer other than
2xx/3xx, or a failed socket, marks its row and makes the exit code 1; targets are reported, not
enforced. Creating runs after the list, so the list's window holds the loaded links only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from tests.support.processes import ServeProcess, free_port, start_listening

from bench.api_data import load_links, register_webhooks, today_links
from bench.api_wrk import Load, Round, require_wrk, run_round
from bench.deployment import CUSTOMER_ID, Deployment, deployed, event_body
from bench.server_processes import stop

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test_benchapi"
BATCH = 100


@dataclass(frozen=True)
class Operation:
    name: str
    load: Load
    target: float | None  # of the bare route's requests/s
    driver: bool = True  # has a driver ceiling
    p99_under_ms: float | None = None
    events_per_request: int = 0


@dataclass
class Row:
    operation: Operation
    rounds: dict[str, list[Round]] = field(default_factory=dict)

    def median(self, target: str, value: Callable[[Round], float]) -> float:
        return statistics.median(value(r) for r in self.rounds[target])

    def rate(self, target: str) -> float:
        return self.median(target, lambda r: r.rate)

    def errors(self) -> int:
        return sum(r.errors for rounds in self.rounds.values() for r in rounds)


def link_body() -> bytes:
    return json.dumps(
        {
            "payerName": "Maria da Silva",
            "registrationNumber": "52998224725",
            "amount": 150.25,
            "numbersInstallments": 3,
            "expirationDays": 5,
            "userReference": "bench",
        }
    ).encode()


def operations(deployment: Deployment, link_paths: list[str]) -> list[Operation]:
    today = datetime.now(UTC).date().isoformat()
    merchant = {"Authorization": f"Bearer {deployment.merchant_token}"}
    posted = {**merchant, "content-type": "application/json"}
    publisher = {
        "Authorization": f"Bearer {deployment.publisher_token}",
        "content-type": "application/json",
    }
    batch = b'{"events":[' + b",".join(event_body() for _ in range(BATCH)) + b"]}"
    return [
        Operation(
            "read a link: GET /payment-link/v1/{uuid}", Load("GET", link_paths, merchant), 0.30
        ),
        Operation(
            "list webhooks (10): GET /webhook/v1/list",
            Load("GET", ["/webhook/v1/list"], merchant),
            0.25,
        ),
        Operation(
            "list links: page of 20 over ~30k",
            Load(
                "GET",
                [f"/payment-link/v1/link-payment?startDate={today}&endDate={today}"],
                merchant,
            ),
            0.10,
            p99_under_ms=200,
        ),
        Operation(
            "create a link: POST /payment-link/v1",
            Load("POST", ["/payment-link/v1"], posted, link_body()),
            0.15,
        ),
        Operation(
            f"publish: POST /internal/v1/events/batch ({BATCH})",
            Load("POST", ["/internal/v1/events/batch"], publisher, batch),
            None,
            driver=False,
            events_per_request=BATCH,
        ),
    ]


def start_ceiling(name: str, workdir: Path, env: dict[str, str]) -> ServeProcess:
    """A ceiling app (bench/api_driver.py) on uvicorn as `tucano serve` runs it."""
    port = free_port()
    argv = [
        *(sys.executable, "-m", "uvicorn", "--factory", f"bench.api_driver:{name}_app"),
        *("--loop", "uvloop", "--http", "httptools", "--no-access-log", "--no-server-header"),
        *("--log-level", "warning", "--host", "127.0.0.1", "--port", str(port)),
    ]
    return start_listening(
        argv,
        port=port,
        cwd=workdir,
        env=env,
        log_path=workdir / f"{name}-{port}.log",
        name=name,
        health_path="/" if name == "bare" else "/health",
    )


async def check_answers(targets: dict[str, ServeProcess], operation: Operation) -> None:
    """One request of the operation to each server, answered 2xx, before wrk hammers them
    (a wrong body or header would otherwise show only as a count)."""
    load = operation.load
    totals: dict[str, object] = {}
    async with aiohttp.ClientSession() as http:
        for name, server in targets.items():
            path = "/" if name == "bare" else load.paths[0]
            method = "GET" if name == "bare" else load.method
            headers = {**load.headers, "x-transaction-id": str(uuid.uuid4())}
            async with http.request(
                method, server.base_url + path, headers=headers, data=load.body
            ) as response:
                if response.status >= 300:
                    text = (await response.text())[:300]
                    raise RuntimeError(f"{name}: {operation.name}: {response.status} {text}")
                if name != "bare" and load.method == "GET" and "list" in operation.name:
                    totals[name] = int((await response.json())["totalElements"])
    # The driver's statements must find what Tucano's find.
    if len(set(totals.values())) > 1:
        raise RuntimeError(f"{operation.name}: the servers disagree on the total: {totals}")


async def measure(database: str, args: argparse.Namespace, wrk: str) -> list[Row]:
    pg_url = os.environ.get("TUCANO_BENCH_DATABASE_URL", DEFAULT_PG_URL)
    async with deployed(
        pg_url if database == "postgresql" else None, servers=1, with_worker=False
    ) as deployment:
        tucano = deployment.servers[0]
        async with aiohttp.ClientSession() as http:
            await register_webhooks(http, tucano.base_url, deployment.merchant_token, 10)
        started = time.perf_counter()
        links = today_links(CUSTOMER_ID, args.links, datetime.now(UTC))
        await load_links(deployment.database_url, links)
        print(f"{database}: loaded {len(links):,} links in {time.perf_counter() - started:.1f} s")
        link_paths = [f"/payment-link/v1/{row[0]}" for row in links[:: max(1, len(links) // 1000)]]
        env = {
            **deployment.env,
            "BENCH_API_DATABASE_URL": deployment.database_url,
            "BENCH_API_CUSTOMER_ID": str(CUSTOMER_ID),
        }
        ceilings = {
            name: start_ceiling(name, deployment.workdir, env) for name in ("bare", "driver")
        }
        try:
            return await run_operations(
                wrk, {**ceilings, "tucano": tucano}, operations(deployment, link_paths), args
            )
        finally:
            for ceiling in ceilings.values():
                stop(ceiling)


async def run_operations(
    wrk: str, servers: dict[str, ServeProcess], ops: list[Operation], args: argparse.Namespace
) -> list[Row]:
    bare_load = Load("GET", ["/"], ops[0].load.headers)

    async def run(server: ServeProcess, script: Path, seconds: int) -> Round:
        return await asyncio.to_thread(
            run_round,
            wrk,
            server.base_url,
            script,
            pid=server.process.pid,
            seconds=seconds,
            connections=args.connections,
        )

    rows = []
    with tempfile.TemporaryDirectory(prefix="tucano_bench_api_") as scripts:
        for index, operation in enumerate(ops):
            targets = {n: s for n, s in servers.items() if n != "driver" or operation.driver}
            await check_answers(targets, operation)
            script = {
                name: (bare_load if name == "bare" else operation.load).script(
                    Path(scripts), f"{index}-{name}"
                )
                for name in targets
            }
            for name, server in targets.items():
                # A warm-up, not counted: connections, caches, statements prepared.
                await run(server, script[name], 1)
            row = Row(operation, {name: [] for name in targets})
            for _ in range(args.rounds):
                for name, server in targets.items():
                    row.rounds[name].append(await run(server, script[name], args.seconds))
            rows.append(row)
    return rows


def print_table(database: str, rows: list[Row], args: argparse.Namespace) -> None:
    bare = [r for row in rows for r in row.rounds["bare"]]
    print(
        f"\n{database}: {args.connections} connections, {args.rounds} rounds of {args.seconds} s, "
        f"medians; bare route {statistics.median(r.rate for r in bare):,.0f} req/s, "
        f"{statistics.median(r.cpu_us_per_request for r in bare):.0f} µs CPU/req "
        f"({os.cpu_count()} CPUs, shared by wrk, the servers and the database)\n"
    )
    head = (
        f"{'operation':<45} {'tucano/s':>9} {'of bare':>7} {'driver/s':>9} {'of bare':>7} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'µs/req':>7} {'drv µs':>7} {'target':>8} {'met?':>5}"
    )
    print(head)
    print("-" * len(head))
    notes = []
    for row in rows:
        op = row.operation
        bare_rate = row.rate("bare")
        tucano = row.rate("tucano")
        share = tucano / bare_rate
        p99 = row.median("tucano", lambda r: r.p99_ms)
        driver, driver_share, driver_cpu = "-", "-", "-"
        if op.driver:
            driver = f"{row.rate('driver'):,.0f}"
            driver_share = f"{row.rate('driver') / bare_rate:.3f}"
            driver_cpu = f"{row.median('driver', lambda r: r.cpu_us_per_request):.0f}"
        target, met = "-", "-"
        if op.target is not None:
            target = f">={op.target:.2f}"
            ok = share >= op.target
            if op.p99_under_ms is not None:
                target += f", p99<{op.p99_under_ms:.0f}"
                ok = ok and p99 < op.p99_under_ms
            met = "yes" if ok else "no"
        if row.errors():
            met = f"ERR {row.errors()}"
        print(
            f"{op.name:<45} {tucano:>9,.0f} {share:>7.3f} {driver:>9} {driver_share:>7} "
            f"{row.median('tucano', lambda r: r.p50_ms):>7.1f} {p99:>7.1f} "
            f"{row.median('tucano', lambda r: r.cpu_us_per_request):>7.0f} {driver_cpu:>7} "
            f"{target:>8} {met:>5}"
        )
        if op.events_per_request:
            notes.append(f"publish: {tucano * op.events_per_request:,.0f} events/s")
    for note in notes:
        print(note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--links", type=int, default=30_000, help="links in the list's window")
    args = parser.parse_args()
    wrk = require_wrk()
    databases = ("sqlite", "postgresql") if args.database == "both" else (args.database,)
    failed = False
    for database in databases:
        rows = asyncio.run(measure(database, args, wrk))
        print_table(database, rows, args)
        failed = failed or any(row.errors() for row in rows)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
