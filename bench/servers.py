"""Benchmark: Tucano on uvicorn against Tucano on granian, for throughput and for connections
that never finish their headers, each beside a bare route on the same server, in one run.

    .venv/bin/python -m bench.servers                          # SQLite in a temporary directory
    .venv/bin/python -m bench.servers --database-url postgresql+asyncpg://postgres@127.0.0.1/test

What runs, each server in a process of its own, all on one database with the same settings
(sandbox, `TUCANO_RATE_LIMIT=1000000/second`, `TUCANO_LOG_LEVEL=WARNING`, one secret key):

- uvicorn / Tucano: the real `tucano serve --no-worker`, so uvicorn runs exactly as Tucano sets
  it up (`--max-connections` is passed as TUCANO_MAX_CONNECTIONS, its `limit_concurrency`;
  uvicorn has no header timeout: in production the proxy bounds header time, docs/security.md);
- granian / Tucano: the same app (`bench.server_apps:tucano_app`) on `granian --interface asgi
  --loop uvloop --workers 1 --http 1`, its header read timeout set to `--header-timeout` and,
  with `--max-connections`, its `--backpressure` (the connections a worker accepts) to it;
- a bare route (one `GET /` answering a small JSON) on uvicorn (uvloop, httptools, no access
  log) and on granian: the ceiling of each server.

Throughput: an aiohttp client keeps `--concurrency` requests in flight for `--seconds` per
scenario, in `--rounds` rounds, servers interleaved (which goes first alternates): the bare
`GET /`, Tucano's `GET /health/live`, and `GET /payment-link/v1/{uuid}` of one of a few links
with a bearer token. Beside each rate, the server's own CPU time per answer.

Slow headers: against a fresh Tucano process on each server, `--slow-connections` sockets each
send half a request and nothing more (those not connected within 15 s are not tried); then for
`--slow-seconds` a normal request starts every 100 ms on a fresh connection (5 s to answer).
Recorded: normal requests answered and failed, their latency, how many slow sockets the server
closed and after how long, and the lines the server logged meanwhile. With `--max-connections`,
also a row with twice that many slow sockets.

Placement (unless `--no-pin`, on two or more CPUs): the servers, every thread and child process,
on the first CPU; this process, the load, on the last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.processes import ServeProcess

from bench.deliveries import Meter, Placement, run
from bench.server_processes import SERVERS, Kind, Setup, cpu_seconds, stop, tree_facts
from bench.server_report import BARE, Measured, machine_facts, merge, slow_table, throughput_table
from bench.slow_headers import SlowReport, failure_name, hold_slow_sockets
from tucano.runtime import raise_open_files_limit

CUSTOMER_ID = 4343
LINKS = 20
LINK = {
    "payerName": "Maria da Silva",
    "registrationNumber": "52998224725",
    "amount": 150.00,
    "numbersInstallments": 3,
    "expirationDays": 5,
    "userReference": "bench-servers",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    app: str  # the Kind.app it runs against
    path: Callable[[], str]
    authorized: bool = False


async def hammer(
    base_url: str, scenario: Scenario, token: str, *, seconds: float, concurrency: int
) -> Measured:
    """Keep `concurrency` requests in flight for `seconds`; count answers, errors, latencies."""
    result = Measured(seconds=seconds)
    stop_at = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def loop() -> None:
            while time.perf_counter() < stop_at:
                headers = {}
                if scenario.authorized:  # the API's routes ask for a transaction id too
                    headers = {
                        "Authorization": f"Bearer {token}",
                        "x-transaction-id": str(uuid.uuid4()),
                    }
                started = time.perf_counter()
                try:
                    async with http.get(base_url + scenario.path(), headers=headers) as response:
                        await response.read()
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    result.errors[failure_name(exc)] += 1
                    continue
                if response.status == 200:
                    result.ok += 1
                    result.latencies.append((time.perf_counter() - started) * 1000)
                else:
                    result.errors[str(response.status)] += 1

        await asyncio.gather(*(loop() for _ in range(concurrency)))
    result.round_rates.append(result.rate)
    return result


async def token_and_links(base_url: str, client: dict[str, str]) -> tuple[str, list[str]]:
    """An access token of the benchmark's client, and LINKS links it created."""
    form = {
        "grant_type": "client_credentials",
        "client_id": client["clientId"],
        "client_secret": client["clientSecret"],
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url + "/oauth/v1/token", data=form) as response:
            token: str = (await response.json())["access_token"]
        links = []
        for _ in range(LINKS):
            headers = {
                "Authorization": f"Bearer {token}",
                "content-type": "application/json",
                "x-transaction-id": str(uuid.uuid4()),
            }
            async with http.post(
                base_url + "/payment-link/v1", data=json.dumps(LINK), headers=headers
            ) as response:
                if response.status not in (200, 201):
                    raise RuntimeError(f"creating a link: {await response.text()}")
                links.append((await response.json())["linkPaymentUuid"])
    return token, links


async def measure_throughput(
    setup: Setup, args: argparse.Namespace, client: dict[str, str], placement: Placement
) -> tuple[dict[tuple[str, str], Measured], dict[str, str]]:
    """Every scenario on every server, in rounds; returns them by (scenario, server)."""
    kinds = [Kind(server, app) for app in ("bare", "tucano") for server in SERVERS]
    started: dict[Kind, ServeProcess] = {}
    try:
        for kind in kinds:
            started[kind] = setup.start(kind)
        facts = {k.label: tree_facts(p.process.pid) for k, p in started.items()}
        token, links = await token_and_links(started[Kind("uvicorn", "tucano")].base_url, client)
        scenarios = [
            Scenario(BARE, "bare", lambda: "/"),
            Scenario("Tucano `GET /health/live`", "tucano", lambda: "/health/live"),
            Scenario(
                "Tucano `GET /payment-link/v1/{uuid}`",
                "tucano",
                lambda: f"/payment-link/v1/{random.choice(links)}",
                authorized=True,
            ),
        ]
        results: dict[tuple[str, str], Measured] = {}
        for round_index in range(args.rounds):
            order = SERVERS if round_index % 2 == 0 else SERVERS[::-1]
            for scenario in scenarios:
                for server in order:
                    process = started[Kind(server, scenario.app)]
                    meter = Meter(placement)
                    cpu_before = cpu_seconds(process.process.pid)
                    one = await hammer(
                        process.base_url,
                        scenario,
                        token,
                        seconds=args.seconds,
                        concurrency=args.concurrency,
                    )
                    one.server_cpu_seconds = cpu_seconds(process.process.pid) - cpu_before
                    busy = meter.read()[1]
                    if busy is not None:
                        one.busy.append(busy)
                    merge(results.setdefault((scenario.name, server), Measured()), one)
        return results, facts
    finally:
        for process in started.values():
            stop(process)


async def measure_slow_headers(
    setup: Setup, server: str, count: int, seconds: float
) -> tuple[SlowReport, str]:
    process = setup.start(Kind(server, "tucano"))
    try:
        facts = tree_facts(process.process.pid)
        port = int(process.base_url.rsplit(":", 1)[1])
        report = await hold_slow_sockets(
            "127.0.0.1", port, count=count, seconds=seconds, log_path=process.log_path
        )
        report.server_exit = process.process.poll()
        return report, facts
    finally:
        stop(process)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a PostgreSQL database to make a scratch one beside")
    parser.add_argument("--seconds", type=float, default=8, help="per scenario and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--slow-connections", type=int, default=3000)
    parser.add_argument("--slow-seconds", type=float, default=20)
    parser.add_argument("--header-timeout", type=float, default=10, help="seconds, granian's")
    parser.add_argument(
        "--max-connections", type=int, help="TUCANO_MAX_CONNECTIONS; granian's --backpressure"
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="leave CPU placement to the operating system"
    )
    return parser.parse_args()


async def main() -> None:
    args = parse_args()
    placement = Placement.choose(pin=not args.no_pin)
    placement.pin(os.getpid(), placement.others)  # the threads started later inherit it
    fd_limit = raise_open_files_limit()
    slow_counts = [args.slow_connections]
    if args.max_connections is not None:
        slow_counts.append(2 * args.max_connections)
    if max(slow_counts) + 200 > fd_limit:
        print(f"warning: {max(slow_counts):,} slow sockets near this process's {fd_limit:,} fds")
    workdir = Path(tempfile.mkdtemp(prefix="tucano-bench-servers-"))
    database_url = (
        await create_scratch_database(args.database_url, prefix="tucano_bench")
        if args.database_url
        else f"sqlite+aiosqlite:///{workdir / 'tucano.db'}"
    )
    setup = Setup.make(
        workdir,
        database_url,
        header_timeout_seconds=args.header_timeout,
        max_connections=args.max_connections,
        server_cpus=placement.measured,
    )
    try:
        setup.migrate()
        client = setup.create_client(CUSTOMER_ID)
        results, facts = await measure_throughput(setup, args, client, placement)
        reports: list[tuple[str, SlowReport]] = []
        for count in slow_counts:
            for server in SERVERS:
                report, facts[f"{server} / Tucano, slow headers"] = await measure_slow_headers(
                    setup, server, count, args.slow_seconds
                )
                reports.append((f"{server} / {count:,}", report))
    finally:
        if args.database_url:
            await drop_scratch_database(args.database_url, database_url)

    database = "PostgreSQL" if args.database_url else "SQLite"
    cap = args.max_connections
    print(
        f"\n## Throughput ({database}; {args.concurrency} in flight, {args.rounds} rounds of "
        f"{args.seconds:g} s per scenario and server. 'rounds': the lowest and highest round; "
        "latencies over all rounds; 'server CPU us/req': CPU time of the server process per "
        "answer (unlike req/s, not lowered by other work on the machine); 'CPU 0/1 busy': the "
        "servers' CPU and the load's, whatever ran on them)\n"
    )
    print(throughput_table(results))
    print(
        f"\n## Slow headers (granian's header timeout {args.header_timeout:g} s; connection cap "
        f"{cap if cap is not None else 'not set'}; {args.slow_seconds:g} s of a normal "
        "request every 100 ms, 5 s each; 'first / last closed after' is from a slow socket's "
        "partial header to the server closing it, within the window)\n"
    )
    print(slow_table(reports))
    for label, report in reports:
        for line in report.log_lines[:3]:
            print(f"\n{label} logged: {line[:300]}")
    print("\n## Machine\n")
    print(machine_facts(placement, fd_limit, facts))
    sys.stdout.flush()


if __name__ == "__main__":
    run(main)
