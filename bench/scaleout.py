"""Scale-out: one and two `tucano worker` processes beside two `tucano serve --no-worker` on one
PostgreSQL, delivery throughput and latency, beside bare clients in the same run.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.scaleout

What runs: two `tucano serve --no-worker` on a fresh PostgreSQL database, receivers
(bench/receivers.py) in a process of their own with one PIX_OUTBOUND webhook each, and for each
worker count (`--workers`, 1 and 2) that many `tucano worker` processes, with default settings.
Events are published through `POST /internal/v1/events`, one per request, alternately to the two
servers, 32 in flight.

- backlog: `--events` events are published while no worker runs; then the workers start, and
  throughput is deliveries / (last receipt - first receipt), so the workers' start-up is left out.
- paced: with the workers running, events are published for `--seconds` at `--paced-share` of
  the one-worker backlog's rate; latency runs from the publishing request being sent (the event
  commits a little later: an upper bound of event committed to received) to each receipt; the
  rate is deliveries over the publishing and the drain after it.
- ceilings: one and two bare clients (bench/bare_client.py), each a process posting the same
  signed bodies to the same receivers with a worker's concurrency (64), measured first and last;
  each worker count's throughput is read against the mean of the same number of bare clients.
  A bare client paced at the same rate gives the latency of a process that only POSTs.

Beside each row: the workers' CPU time per delivery (from /proc/PID/stat) and how busy the
machine's CPUs were, as every process here shares them. Exits 1 if any delivery is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.deliveries import Meter, Placement, Receivers, paced_ceiling, percentile, run
from bench.deployment import Deployment, deployed, event_body
from bench.served import postgres_url
from bench.soak import paced

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    name: str
    deliveries: int
    seconds: float
    ceiling: str = ""  # the ceiling row this one is read against
    p50_ms: float | None = None
    p99_ms: float | None = None
    cpu_us: float | None = None  # the workers' CPU time per delivery
    busy: float | None = None

    @property
    def rate(self) -> float:
        return self.deliveries / self.seconds if self.seconds else 0.0


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of processes so far, from /proc/PID/stat."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / TICKS


async def bare_clients(receivers: Receivers, processes: int, events: int) -> Row:
    """`processes` bare clients posting at once; throughput over all of them together."""
    row = await asyncio.to_thread(_bare_clients, receivers, processes, events)
    async with aiohttp.ClientSession() as http:
        await receivers.arrivals(http)  # discard: the scenarios count their own
    return row


def _bare_clients(receivers: Receivers, processes: int, events: int) -> Row:
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.bare_client", ",".join(receivers.urls()), str(events)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        for _ in range(processes)
    ]
    for process in started:
        assert process.stdout is not None and process.stdin is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError("a bare client did not start")
    meter = Meter(receivers.placement)
    for process in started:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = [json.loads(process.communicate()[0]) for process in started]
    _, busy = meter.read()
    seconds = max(r["finished"] for r in results) - min(r["started"] for r in results)
    return Row(
        ceiling_name(processes),
        sum(r["deliveries"] for r in results),
        seconds,
        busy=busy[0] if busy else None,
    )


async def publish(
    deployment: Deployment, http: aiohttp.ClientSession, sent_at: dict[str, float], index: int
) -> None:
    """One event, through the servers in turn; its id and when its request was sent."""
    server = deployment.servers[index % len(deployment.servers)]
    sent = time.time()
    async with http.post(
        server.base_url + "/internal/v1/events",
        data=event_body(),
        headers=deployment.headers(deployment.publisher_token),
    ) as response:
        if response.status != 202:
            raise RuntimeError(f"publishing answered {response.status}: {await response.text()}")
        sent_at[(await response.json())["eventId"]] = sent


async def backlog(
    deployment: Deployment, http: aiohttp.ClientSession, events: int
) -> dict[str, float]:
    sent_at: dict[str, float] = {}
    queue = iter(range(events))

    async def publisher() -> None:
        for index in queue:
            await publish(deployment, http, sent_at, index)

    await asyncio.gather(*(publisher() for _ in range(32)))
    return sent_at


async def paced_publishing(
    deployment: Deployment, http: aiohttp.ClientSession, rate: float, seconds: float
) -> dict[str, float]:
    """Events at `rate` a second for `seconds` (32 requests in flight at most)."""
    sent_at: dict[str, float] = {}
    index = itertools.count()
    await paced(
        rate,
        32,
        time.monotonic() + seconds,
        lambda: publish(deployment, http, sent_at, next(index)),
    )
    return sent_at


def missing(arrived: list[tuple[str, float]], sent_at: dict[str, float], fan_out: int) -> int:
    counts = collections.Counter(i for i, _ in arrived)
    return sum(max(0, fan_out - counts[i]) for i in sent_at)


def ceiling_name(processes: int) -> str:
    """The name of the bare clients' row a row of `processes` workers is read against."""
    return f"ceiling: {processes} bare client{'s' if processes > 1 else ''}"


async def drained(
    deployment: Deployment,
    receivers: Receivers,
    http: aiohttp.ClientSession,
    count: int,
    sent_at: dict[str, float],
    name: str,
) -> tuple[Row, int]:
    """Start `count` workers on the backlog `sent_at` names and wait for every delivery: the
    drain's row (deliveries / (last receipt - first receipt), the workers' CPU and the machine's
    busy share over the same span, so start-up is left out) and how many deliveries are missing."""
    fan_out = len(receivers.urls())
    deployment.start_workers(count)
    pids = [w.process.pid for w in deployment.workers]
    arrived = await receivers.wait_for(http, 1, within=60)
    cpu, meter = cpu_seconds(pids), Meter(receivers.placement)
    arrived += await receivers.wait_for(http, len(sent_at) * fan_out - len(arrived), 300)
    _, busy = meter.read()
    times = [t for _, t in arrived]
    row = Row(
        name,
        len(arrived),
        max(times) - min(times) if times else 0.0,
        ceiling=ceiling_name(count),
        cpu_us=(cpu_seconds(pids) - cpu) / max(1, len(arrived)) * 1e6,
        busy=busy[0] if busy else None,
    )
    return row, missing(arrived, sent_at, fan_out)


async def scenarios(
    deployment: Deployment, receivers: Receivers, args: argparse.Namespace, rows: list[Row]
) -> int:
    """The backlog and paced runs for each worker count; how many deliveries went missing."""
    fan_out = len(receivers.urls())
    lost = 0
    paced_rate: float | None = None
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        for count in args.workers:
            workers = f"{count} worker{'s' if count > 1 else ''}"
            sent_at = await backlog(deployment, http, args.events)
            row, lost_in_drain = await drained(
                deployment,
                receivers,
                http,
                count,
                sent_at,
                f"{workers}: backlog of {args.events} events x {fan_out} webhooks",
            )
            rows.append(row)
            lost += lost_in_drain
            pids = [w.process.pid for w in deployment.workers]

            if paced_rate is None:
                paced_rate = row.rate * args.paced_share
            cpu, meter = cpu_seconds(pids), Meter(receivers.placement)
            began = time.monotonic()
            sent_at = await paced_publishing(deployment, http, paced_rate / fan_out, args.seconds)
            _, busy = meter.read()
            arrived = await receivers.wait_for(http, len(sent_at) * fan_out, within=120)
            latencies = [(t - sent_at[i]) * 1000 for i, t in arrived if i in sent_at]
            rows.append(
                Row(
                    f"{workers}: paced at {paced_rate:.0f}/s",
                    len(arrived),
                    time.monotonic() - began,
                    p50_ms=statistics.median(latencies),
                    p99_ms=percentile(latencies, 0.99),
                    cpu_us=(cpu_seconds(pids) - cpu) / max(1, len(arrived)) * 1e6,
                    busy=busy[0] if busy else None,
                )
            )
            lost += missing(arrived, sent_at, fan_out)
            await asyncio.to_thread(deployment.stop_workers)
        assert paced_rate is not None
        bare = await paced_ceiling(receivers, paced_rate, args.seconds)
        rows.append(
            Row(
                bare.name,
                bare.deliveries,
                bare.seconds,
                p50_ms=bare.p50_ms,
                p99_ms=bare.p99_ms,
                busy=bare.busy[0] if bare.busy else None,
            )
        )
    return lost


def table(rows: list[Row], ceilings: dict[str, float]) -> str:
    lines = [
        f"{'scenario':<52} {'deliveries':>10} {'per second':>11} {'of ceiling':>10}"
        f" {'p50 ms':>8} {'p99 ms':>8} {'CPU us':>7} {'busy':>5}",
        "-" * 118,
    ]
    for row in rows:
        share = f"{row.rate / ceilings[row.ceiling]:.0%}" if row.ceiling in ceilings else "-"
        p50 = f"{row.p50_ms:.1f}" if row.p50_ms is not None else "-"
        p99 = f"{row.p99_ms:.1f}" if row.p99_ms is not None else "-"
        cpu = f"{row.cpu_us:.0f}" if row.cpu_us is not None else "-"
        busy = f"{row.busy:.0%}" if row.busy is not None else "-"
        lines.append(
            f"{row.name:<52} {row.deliveries:>10} {row.rate:>11.0f} {share:>10} {p50:>8}"
            f" {p99:>8} {cpu:>7} {busy:>5}"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000, help="events in each backlog")
    parser.add_argument("--receivers", type=int, default=4, help="receivers (one webhook each)")
    parser.add_argument("--seconds", type=float, default=15, help="length of each paced run")
    parser.add_argument("--workers", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2])
    parser.add_argument(
        "--paced-share", type=float, default=0.5, help="paced rate / one-worker backlog's rate"
    )
    args = parser.parse_args()
    pg_url = postgres_url()
    receivers = Receivers(args.receivers, Placement(None, None))
    rows: list[Row] = []
    try:
        counts = sorted(set(args.workers))
        first = [await bare_clients(receivers, n, args.events) for n in counts]
        async with deployed(pg_url, servers=2, with_worker=False) as deployment:
            async with aiohttp.ClientSession() as http:
                await deployment.register(http, receivers.urls())
            lost = await scenarios(deployment, receivers, args, rows)
        last = [await bare_clients(receivers, n, args.events) for n in counts]
    finally:
        receivers.stop()
    ceilings = {a.name: (a.rate + b.rate) / 2 for a, b in zip(first, last, strict=True)}
    print(
        f"\nScale-out on PostgreSQL ({os.cpu_count()} CPUs shared by every process): two "
        f"`tucano serve --no-worker`, {args.receivers} receivers; 'of ceiling' is against the "
        f"mean of the same number of bare clients measured first and last; 'CPU us' is the "
        f"workers' CPU time per delivery; 'busy' is how busy the machine's CPUs were\n"
    )
    print(table([*first, *rows, *last], ceilings))
    print(f"\nmissing deliveries: {lost}")
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    run(main)
