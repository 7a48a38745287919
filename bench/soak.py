"""Soak: minutes of mixed API and delivery load on real processes, and their resident memory.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.soak                   # 5 minutes on PostgreSQL
    .venv/bin/python -m bench.soak --database sqlite --minutes 2

What runs: on PostgreSQL, `tucano serve --no-worker` and `tucano worker`, each a process of its
own, on a fresh database; on SQLite, one `tucano serve` (API, worker and jobs in one process).
Receivers (bench/receivers.py) in a process of their own, one PIX_OUTBOUND webhook on each.
For `--minutes`, this process keeps two paced loads going:

- API: `--api-rate` requests a second, a mix of payment-link create (30%), read (40%) and list
  of today's links (15%), and webhook list (15%);
- events: `--event-rate` publications a second through `POST /internal/v1/events`, each fanned
  out to every receiver.

Every `--sample-seconds` it reads each process's VmRSS from /proc/PID/status. The receivers'
process (a bare aiohttp server under the same traffic) is sampled beside them for reference.
After the load, it waits for every delivery to arrive. The growth of a Tucano process is its RSS
at the end of the load against its RSS at one minute (the warm-up: imports, pools, caches
filling); the run exits 1 if any grows by 10% or more, if any request failed or any delivery
is missing, or if a process exited.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from bench.deliveries import Placement, Receivers, percentile, run
from bench.deployment import Deployment, deployed, event_body, resident_kib
from bench.payment_links import link_body
from bench.served import postgres_url
from tucano.core.clock import clock

GROWTH_LIMIT = 0.10
WARM_UP_SECONDS = 60.0
API_MIX = {"create a link": 30, "read a link": 40, "list links": 15, "list webhooks": 15}


@dataclass
class Tally:
    """What the load did: requests by operation, their latencies, failures by kind."""

    served: collections.Counter[str] = field(default_factory=collections.Counter)
    latencies: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    # Event id -> when its request was sent (the commit is later: latency read from here is an
    # upper bound; from the 202, a busy client would read it short, even below zero).
    published_at: dict[str, float] = field(default_factory=dict)


class Load:
    def __init__(self, deployment: Deployment, http: aiohttp.ClientSession, tally: Tally) -> None:
        self.deployment = deployment
        self.base_url = deployment.servers[0].base_url
        self.http = http
        self.tally = tally
        self.links: collections.deque[str] = collections.deque(maxlen=1000)

    async def call(
        self, operation: str, method: str, path: str, token: str, expected: int, **kwargs: object
    ) -> dict[str, object] | None:
        started = time.perf_counter()
        try:
            async with self.http.request(
                method, self.base_url + path, headers=self.deployment.headers(token), **kwargs
            ) as response:
                body = await response.json() if response.status == expected else None
                if response.status != expected:
                    self.tally.errors[f"{operation}: HTTP {response.status}"] += 1
                    return None
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.tally.errors[f"{operation}: {type(exc).__name__}"] += 1
            return None
        self.tally.served[operation] += 1
        self.tally.latencies[operation].append((time.perf_counter() - started) * 1000)
        return body if isinstance(body, dict) else {}

    async def api_request(self, operation: str) -> None:
        token = self.deployment.merchant_token
        if operation == "read a link" and not self.links:
            operation = "create a link"
        if operation == "create a link":
            link = await self.call(
                operation, "POST", "/payment-link/v1", token, 200, data=link_body()
            )
            if link:
                self.links.append(str(link["linkPaymentUuid"]))
        elif operation == "read a link":
            await self.call(
                operation, "GET", f"/payment-link/v1/{random.choice(self.links)}", token, 200
            )
        elif operation == "list links":
            today = clock.now().date().isoformat()
            params = {"startDate": today, "endDate": today, "size": "20"}
            await self.call(
                operation, "GET", "/payment-link/v1/link-payment", token, 200, params=params
            )
        else:
            await self.call(operation, "GET", "/webhook/v1/list", token, 200)

    async def publish(self) -> None:
        token = self.deployment.publisher_token
        sent = time.time()
        accepted = await self.call(
            "publish an event", "POST", "/internal/v1/events", token, 202, data=event_body()
        )
        if accepted:
            self.tally.published_at[str(accepted["eventId"])] = sent


async def paced(rate: float, loops: int, until: float, step: Callable[[], Awaitable[None]]) -> None:
    """`loops` loops sharing `rate` calls a second until `until` (monotonic); a loop that falls
    behind catches up without sleeping, so the rate holds while the service keeps up."""

    async def loop(offset: float) -> None:
        interval = loops / rate
        due = time.monotonic() + offset * interval
        while due < until:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await step()
            due += interval

    await asyncio.gather(*(loop(i / loops) for i in range(loops)))


@dataclass
class Memory:
    pids: dict[str, int]
    samples: list[tuple[float, dict[str, int | None]]] = field(default_factory=list)

    async def sample_until(self, began: float, until: float, every: float) -> None:
        while (now := time.monotonic()) < until:
            self.samples.append((now - began, {n: resident_kib(p) for n, p in self.pids.items()}))
            await asyncio.sleep(min(every, max(0.0, until - time.monotonic())))
        self.samples.append(
            (time.monotonic() - began, {n: resident_kib(p) for n, p in self.pids.items()})
        )

    def at(self, name: str, seconds: float) -> int | None:
        """The first sample taken at or after `seconds` into the load."""
        return next((s[name] for t, s in self.samples if t >= seconds), None)

    def last(self, name: str) -> int | None:
        return self.samples[-1][1][name] if self.samples else None


async def collect_arrivals(
    receivers: Receivers,
    http: aiohttp.ClientSession,
    arrived: collections.Counter[str],
    times: dict[str, float],
    stop: asyncio.Event,
) -> None:
    """Empty the receivers' record every second, so neither side holds the whole run's."""
    while not stop.is_set():
        for event_id, at in await receivers.arrivals(http):
            arrived[event_id] += 1
            times.setdefault(event_id, at)  # the first webhook's receipt of the event
        await asyncio.sleep(1)


def error_lines(logs: str) -> int:
    """Lines a process logged at error level or above (its logs are JSON lines)."""
    count = 0
    for line in logs.splitlines():
        with contextlib.suppress(ValueError):
            count += json.loads(line).get("level") in ("error", "critical")
    return count


def mib(kib: int | None) -> str:
    return f"{kib / 1024:.1f}" if kib is not None else "gone"


def memory_table(memory: Memory, tucano: list[str]) -> tuple[str, bool]:
    lines = [
        f"{'process':<40} {'RSS 1 min MiB':>14} {'RSS end MiB':>12} {'growth':>8} {'peak MiB':>9}",
        "-" * 88,
    ]
    ok = True
    for name in memory.pids:
        first, last = memory.at(name, WARM_UP_SECONDS), memory.last(name)
        peaks = [s[name] for t, s in memory.samples if t >= WARM_UP_SECONDS and s[name]]
        growth = (last - first) / first if first and last else None
        if name in tucano and (growth is None or growth >= GROWTH_LIMIT):
            ok = False
        shown = f"{growth:+.1%}" if growth is not None else "-"
        lines.append(
            f"{name:<40} {mib(first):>14} {mib(last):>12} {shown:>8}"
            f" {mib(max(peaks, default=None)):>9}"
        )
    return "\n".join(lines), ok


def minutes_table(memory: Memory) -> str:
    marks = (
        [m * 60.0 for m in range(int(memory.samples[-1][0] // 60) + 1)] if memory.samples else []
    )
    header = f"{'RSS MiB at minute':<40}" + "".join(f"{int(m // 60):>8}" for m in marks)
    lines = [header, "-" * len(header)]
    for name in memory.pids:
        lines.append(f"{name:<40}" + "".join(f"{mib(memory.at(name, m)):>8}" for m in marks))
    return "\n".join(lines)


def requests_table(tally: Tally, seconds: float) -> str:
    lines = [
        f"{'operation':<40} {'served':>9} {'per second':>11} {'p50 ms':>8} {'p99 ms':>8}",
        "-" * 80,
    ]
    for name in [*API_MIX, "publish an event"]:
        latencies = tally.latencies.get(name) or [0.0]
        lines.append(
            f"{name:<40} {tally.served[name]:>9} {tally.served[name] / seconds:>11.1f}"
            f" {statistics.median(latencies):>8.1f} {percentile(latencies, 0.99):>8.1f}"
        )
    return "\n".join(lines)


async def soak(args: argparse.Namespace) -> int:
    pg_url = postgres_url() if args.database == "postgresql" else None
    receivers = Receivers(args.receivers, Placement(None, None))
    tally = Tally()
    arrived: collections.Counter[str] = collections.Counter()
    first_receipt: dict[str, float] = {}
    try:
        async with (
            deployed(pg_url, servers=1, with_worker=pg_url is None) as deployment,
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=args.loops * 2),
                timeout=aiohttp.ClientTimeout(total=30),
            ) as http,
        ):
            async with aiohttp.ClientSession() as setup:
                await deployment.register(setup, receivers.urls())
            pids = {
                "tucano serve"
                + (" --no-worker" if pg_url else " (API, worker, jobs)"): deployment.servers[
                    0
                ].process.pid
            }
            if pg_url:
                deployment.start_workers(1)
                pids["tucano worker"] = deployment.workers[0].process.pid
            tucano = list(pids)
            pids["receivers (bare aiohttp server, reference)"] = receivers.process.pid
            memory = Memory(pids)
            load = Load(deployment, http, tally)
            stop_collecting = asyncio.Event()
            collector = asyncio.create_task(
                collect_arrivals(receivers, http, arrived, first_receipt, stop_collecting)
            )
            rng = random.Random(27)
            mix = list(API_MIX)
            weights = list(API_MIX.values())

            async def api_step() -> None:
                await load.api_request(rng.choices(mix, weights)[0])

            began = time.monotonic()
            until = began + args.minutes * 60
            print(
                f"soaking for {args.minutes:g} min on {args.database} ...",
                file=sys.stderr,
                flush=True,
            )
            await asyncio.gather(
                memory.sample_until(began, until, args.sample_seconds),
                paced(args.api_rate, args.loops, until, api_step),
                paced(args.event_rate, max(1, args.loops // 2), until, load.publish),
            )
            loaded_for = time.monotonic() - began
            fan_out = len(receivers.urls())
            for _ in range(240):  # up to 2 minutes for the last deliveries
                if all(arrived[i] >= fan_out for i in tally.published_at):
                    break
                await asyncio.sleep(0.5)
            stop_collecting.set()
            await collector
            for server in [*deployment.servers, *deployment.workers]:
                if server.process.poll() is not None:
                    tally.errors[f"{server.log_path.stem}: exited {server.process.returncode}"] += 1
            errors_in_logs = sum(
                error_lines(server.logs()) for server in [*deployment.servers, *deployment.workers]
            )
            if errors_in_logs:
                tally.errors["error lines in the processes' logs"] += errors_in_logs
    finally:
        receivers.stop()

    missing = sum(max(0, fan_out - arrived[i]) for i in tally.published_at)
    duplicates = sum(max(0, n - fan_out) for i, n in arrived.items() if i in tally.published_at)
    latencies = [
        (first_receipt[i] - t) * 1000 for i, t in tally.published_at.items() if i in first_receipt
    ]
    table, memory_ok = memory_table(memory, tucano)
    print(
        f"\nSoak on {args.database} ({os.cpu_count()} CPUs): {loaded_for / 60:.1f} min at "
        f"{args.api_rate:g} API requests/s and {args.event_rate:g} events/s x {fan_out} webhooks; "
        f"RSS sampled every {args.sample_seconds:g} s; growth is the end against minute 1 "
        f"(limit {GROWTH_LIMIT:.0%})\n"
    )
    print(table)
    print()
    print(minutes_table(memory))
    print()
    print(requests_table(tally, loaded_for))
    print(
        f"\ndeliveries made: {sum(arrived.values())} of {len(tally.published_at) * fan_out} "
        f"({len(tally.published_at)} events x {fan_out}); missing {missing}, duplicates "
        f"{duplicates}; event sent to its first receipt: p50 "
        f"{statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms"
    )
    errors = sum(tally.errors.values()) + missing
    print(f"errors: {errors}" + "".join(f"\n  {n}: {k}" for k, n in tally.errors.most_common()))
    if missing:
        print(f"  {missing}: deliveries missing after the load")
    passed = memory_ok and errors == 0
    print("\nPASS" if passed else "\nFAIL")
    return 0 if passed else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5, help="length of the load")
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--api-rate", type=float, default=100, help="API requests a second")
    parser.add_argument("--event-rate", type=float, default=25, help="events published a second")
    parser.add_argument("--receivers", type=int, default=4, help="receivers (one webhook each)")
    parser.add_argument("--loops", type=int, default=16, help="API requests in flight at most")
    parser.add_argument("--sample-seconds", type=float, default=5, help="between RSS samples")
    args = parser.parse_args()
    if args.minutes * 60 <= WARM_UP_SECONDS:
        parser.error("--minutes must be over 1: growth is read against minute 1")
    code = 0

    async def soaked() -> None:
        nonlocal code
        code = await soak(args)

    run(soaked)
    sys.exit(code)


if __name__ == "__main__":
    main()
