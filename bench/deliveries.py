"""Benchmark: webhook deliveries per second and event-to-receipt latency, beside the ceiling.

    .venv/bin/python -m bench.deliveries                      # SQLite, and PostgreSQL if set
    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.deliveries --events 2000

What runs: local receivers in a process of their own (several ports, answering 200 at once), and
in this process, set up as `tucano serve` sets up its own (uvloop, the same garbage-collector
tuning), Tucano's delivery worker with default settings and a publisher calling
`publish_events` (the outbox) the way features do.

- ceiling: a bare aiohttp client posting the same signed bodies to the same receivers at the
  same concurrency (the worker's default, 64), nothing read or written in a database; measured
  first and last, and the engine's rates are read against the mean of the two.
- burst: `--events` events, each fanned out to every receiver's webhook, already in the outbox
  when the worker starts; throughput is deliveries / (last receipt - worker start).
- paced: events published every 20 ms for `--seconds` at half the first ceiling's rate
  (`--paced-share`); latency is receipt time - commit time of the event, per delivery. The bare
  client is paced the same way (the same rate, the same 20 ms ticks, latency from the tick that
  queued the POST): the latency a process that only POSTs reaches at that rate here.

Placement (unless `--no-pin`, on a machine of two or more CPUs): this process runs on the first
CPU; the receivers, and the PostgreSQL backends serving the benchmark's own database, on the
last. The receivers stand for merchants' servers and the database for a database server, which
in production do not take CPU from the process under test; the ceiling is measured under the
same placement. Left to the operating system, results read lower and vary more.

Beside each rate: this process's CPU time per delivery, and how busy each side's CPU was (from
/proc/stat), so that a run shows whether this process or the machine was the limit.

`--databases postgresql-plain` adds a row for PostgreSQL on the plain queue (`SqlQueue`, the
SQLAlchemy statements SQLite runs) instead of the tuned one (`PostgresQueue`): what the tuning
saves, in the same run.

Every database gets a fresh schema (a temporary SQLite file; a new PostgreSQL database beside the
one named, dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import BaseModel
from sqlalchemy.engine import make_url
from tests.support.databases import create_scratch_database, drop_scratch_database

from tucano.config import Settings
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.db.engines import connect_asyncpg
from tucano.deliveries import service as deliveries
from tucano.deliveries.queue.sql import SqlQueue
from tucano.deliveries.worker.loop import DeliveryWorker
from tucano.events.samples import sample_payload
from tucano.events.types import EventType
from tucano.migrations import upgrade
from tucano.runtime import tune_garbage_collector
from tucano.webhooks.models import Webhook
from tucano.webhooks.secret_store import WebhookSecretStore
from tucano.webhooks.service import new_signing_secret
from tucano.webhooks.signing import delivery_headers

CUSTOMER_ID = 424242
# The worker's own default, so that the ceiling and the engine keep the same number in flight.
CONCURRENCY: int = Settings.model_fields["delivery_concurrency"].default


@dataclass
class Row:
    name: str
    deliveries: int
    seconds: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    cpu_seconds: float | None = None  # of this process (all its threads) over the scenario
    # How busy the measured process's CPU and the others' CPU were over the scenario (left to
    # the OS: all CPUs together): shows whether a rate was bound by this process or the machine.
    busy: tuple[float, ...] | None = None

    @property
    def rate(self) -> float:
        return self.deliveries / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Placement:
    """Which CPUs the process under test and the load's other side run on (None: anywhere)."""

    measured: set[int] | None
    others: set[int] | None

    @classmethod
    def choose(cls, pin: bool) -> Placement:
        cpus = sorted(os.sched_getaffinity(0))
        if not pin or len(cpus) < 2:
            return cls(None, None)
        return cls({cpus[0]}, {cpus[-1]})

    def pin(self, pid: int, cpus: set[int] | None) -> None:
        if cpus is not None:
            with contextlib.suppress(OSError):  # gone already, or not ours to move
                os.sched_setaffinity(pid, cpus)

    def describe(self) -> str:
        if self.measured is None:
            return "placement left to the OS"
        return (
            f"measured process on CPU {min(self.measured)}, "
            f"receivers and database on CPU {min(self.others or {0})}"
        )


def _cpu_ticks() -> dict[int, tuple[int, int]]:
    """(busy, total) clock ticks of each CPU since boot, from /proc/stat (empty elsewhere)."""
    ticks: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit():
                values = [int(v) for v in fields]
                idle = values[3] + values[4]  # idle and iowait
                ticks[int(name[3:])] = (sum(values) - idle, sum(values))
    return ticks


class Meter:
    """This process's CPU time and the busy share of the placement's CPUs over one scenario."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self.cpu = time.process_time()
        self.ticks = _cpu_ticks()

    def busy_share(self, cpus: set[int] | None, now: dict[int, tuple[int, int]]) -> float:
        assert cpus is not None
        busy = sum(now[c][0] - self.ticks[c][0] for c in cpus if c in now and c in self.ticks)
        total = sum(now[c][1] - self.ticks[c][1] for c in cpus if c in now and c in self.ticks)
        return busy / total if total else 0.0

    def read(self) -> tuple[float, tuple[float, ...] | None]:
        """(CPU seconds of this process, (measured CPU busy, others' CPU busy), or the busy
        share of all CPUs when placement is left to the OS)."""
        cpu = time.process_time() - self.cpu
        now = _cpu_ticks()
        if not now:
            return cpu, None
        if self.placement.measured is None:
            return cpu, (self.busy_share(set(now), now),)
        return cpu, (
            self.busy_share(self.placement.measured, now),
            self.busy_share(self.placement.others, now),
        )


class Receivers:
    def __init__(self, count: int, placement: Placement) -> None:
        self.placement = placement
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.receivers", str(count)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert self.process.stdout is not None
        self.ports: list[int] = json.loads(self.process.stdout.readline())
        placement.pin(self.process.pid, placement.others)

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/hook" for port in self.ports]

    async def arrivals(self, http: aiohttp.ClientSession) -> list[tuple[str, float]]:
        async with http.get(f"http://127.0.0.1:{self.ports[0]}/_arrivals") as response:
            return [(i, t) for i, t in await response.json()]

    async def wait_for(
        self, http: aiohttp.ClientSession, count: int, within: float
    ) -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []
        deadline = time.monotonic() + within
        while len(seen) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            seen += await self.arrivals(http)
        return seen

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def ceiling(receivers: Receivers, events: int, label: str) -> Row:
    """The bare client: the same signed bodies, the same receivers, the same concurrency."""
    secret = new_signing_secret()
    jobs: list[tuple[str, bytes, dict[str, str]]] = []
    for _ in range(events):
        body = json_codec.dumps(sample_payload(EventType.PIX_OUTBOUND))
        event_id = "evt_" + secrets.token_hex(16)
        headers = delivery_headers(
            secrets=[secret],
            message_id=event_id,
            timestamp=int(time.time()),
            body=body,
            event_type="PIX_OUTBOUND",
            user_agent="bench",
        )
        jobs += [(url, body, headers) for url in receivers.urls()]
    queue: asyncio.Queue[tuple[str, bytes, dict[str, str]]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def post_all() -> None:
            while not queue.empty():
                url, body, headers = queue.get_nowait()
                async with http.post(url, data=body, headers=headers) as response:
                    await response.read()

        started = time.perf_counter()
        meter = Meter(receivers.placement)
        await asyncio.gather(*(post_all() for _ in range(CONCURRENCY)))
        seconds = time.perf_counter() - started
        cpu, busy = meter.read()
        await receivers.arrivals(http)  # discard
    return Row(
        f"ceiling ({label}): bare aiohttp client, no database",
        len(jobs),
        seconds,
        cpu_seconds=cpu,
        busy=busy,
    )


async def paced_ceiling(receivers: Receivers, rate: float, seconds: float) -> Row:
    """The bare client at a paced rate: every 20 ms the POSTs due by the clock are queued for
    the same number of senders; latency runs from the tick that queued a POST to its receipt."""
    secret = new_signing_secret()
    urls = receivers.urls()
    bodies = [json_codec.dumps(p) for p in payloads(int(rate / len(urls) * seconds) + 1)]
    queue: asyncio.Queue[tuple[str, bytes, dict[str, str]]] = asyncio.Queue()
    queued_at: dict[str, float] = {}
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def post_forever() -> None:
            while True:
                url, body, headers = await queue.get()
                async with http.post(url, data=body, headers=headers) as response:
                    await response.read()

        senders = [asyncio.create_task(post_forever()) for _ in range(CONCURRENCY)]
        meter = Meter(receivers.placement)
        tick = 0.02
        events = 0
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < seconds:
            now = time.time()
            for body in bodies[events : int(rate / len(urls) * elapsed)]:
                event_id = "evt_" + secrets.token_hex(16)
                headers = delivery_headers(
                    secrets=[secret],
                    message_id=event_id,
                    timestamp=int(now),
                    body=body,
                    event_type="PIX_OUTBOUND",
                    user_agent="bench",
                )
                queued_at[event_id] = now
                for url in urls:
                    queue.put_nowait((url, body, headers))
                events += 1
            await asyncio.sleep(max(0.0, tick - (time.monotonic() - began) % tick))
        published_for = time.monotonic() - began
        _, busy = meter.read()  # while paced, before the tail drains
        arrived = await receivers.wait_for(http, events * len(urls), within=120)
        cpu, _ = meter.read()
        for sender in senders:
            sender.cancel()
    return latency_row(
        f"ceiling: bare client paced at {rate:.0f}/s",
        arrived,
        queued_at,
        published_for,
        cpu,
        busy,
    )


def latency_row(
    name: str,
    arrived: list[tuple[str, float]],
    sent_at: dict[str, float],
    seconds: float,
    cpu: float,
    busy: tuple[float, ...] | None,
) -> Row:
    """A paced run's row: latency from each event's `sent_at` to each of its receipts."""
    latencies = [(t - sent_at[i]) * 1000 for i, t in arrived if i in sent_at]
    return Row(
        name,
        len(latencies),
        seconds,
        p50_ms=statistics.median(latencies) if latencies else None,
        p99_ms=percentile(latencies, 0.99) if latencies else None,
        cpu_seconds=cpu,
        busy=busy,
    )


async def fresh_database(kind: str, base_url: str | None, workdir: Path) -> str:
    if kind == "sqlite":
        return f"sqlite+aiosqlite:///{workdir / (secrets.token_hex(4) + '.db')}"
    assert base_url is not None
    return await create_scratch_database(base_url, prefix="tucano_bench")


@contextlib.asynccontextmanager
async def database_placed(url: str, placement: Placement) -> AsyncIterator[None]:
    """Keep the PostgreSQL backends serving `url`'s database on the others' CPUs while inside."""
    if placement.others is None or not url.startswith("postgresql"):
        yield
        return
    name = make_url(url).database

    async def keep_placed() -> None:
        connection = await connect_asyncpg(url)
        try:
            while True:
                pids = await connection.fetch(
                    "SELECT pid FROM pg_stat_activity WHERE datname = $1", name
                )
                for row in pids:
                    placement.pin(row["pid"], placement.others)
                await asyncio.sleep(0.25)
        finally:
            await connection.close()

    task = asyncio.create_task(keep_placed())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def payloads(count: int) -> list[BaseModel]:
    """Sample payloads, made before the clock runs: making them is the business's work, not
    the engine's."""
    return [sample_payload(EventType.PIX_OUTBOUND) for _ in range(count)]


async def publish(
    database: Database, payloads: list[BaseModel], committed: dict[str, float]
) -> None:
    """Events in one transaction through the outbox (`publish_events`)."""
    async with database.session() as session:
        published = await deliveries.publish_events(
            session,
            [deliveries.NewEvent(CUSTOMER_ID, EventType.PIX_OUTBOUND, p) for p in payloads],
        )
        await session.commit()
    now = time.time()
    for event in published:
        committed[event.id] = now


async def engine_database(url: str, targets: list[str]) -> tuple[Database, Settings]:
    """A migrated database with one PIX_OUTBOUND webhook per target, and the worker's
    settings (its defaults, loopback receivers allowed)."""
    await asyncio.to_thread(upgrade, url)
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=url,
        webhook_allowed_networks="127.0.0.0/8",
        secret_key="bench-" + "k" * 40,
    )
    database = Database(url)
    now = clock.now()
    store = WebhookSecretStore.of(b"bench-" + b"k" * 40, settings)
    async with database.session() as session:
        for target in targets:
            webhook = Webhook(
                customer_id=CUSTOMER_ID,
                partner_id=None,
                target_url=target,
                event_type="PIX_OUTBOUND",
                is_active=True,
                secret="",
                created_at=now,
                updated_at=now,
            )
            session.add(webhook)
            await session.flush()
            store.seal(webhook, secret=new_signing_secret(), previous_secrets=None)
        await session.commit()
    return database, settings


async def run_engine(
    kind: str, url: str, receivers: Receivers, events: int, paced_rate: float, seconds: float
) -> list[Row]:
    database, settings = await engine_database(url, receivers.urls())
    fan_out = len(receivers.urls())
    rows = []
    async with aiohttp.ClientSession() as http:
        # Burst: the events are in the outbox (published in transactions of 100) when the worker
        # starts; throughput is how fast it drains them.
        committed: dict[str, float] = {}
        burst = payloads(events)
        for start in range(0, events, 100):
            await publish(database, burst[start : start + 100], committed)
        stop = asyncio.Event()
        started = time.time()
        meter = Meter(receivers.placement)
        queue = SqlQueue(database) if kind == "postgresql-plain" else None
        worker = asyncio.create_task(DeliveryWorker(database, settings, queue=queue).run(stop))
        arrived = await receivers.wait_for(http, events * fan_out, within=300)
        cpu, busy = meter.read()
        last = max(t for _, t in arrived)
        rows.append(
            Row(
                f"{kind}: burst of {events} events x {fan_out} webhooks",
                len(arrived),
                last - started,
                cpu_seconds=cpu,
                busy=busy,
            )
        )

        # Paced: events published every 20 ms (as many as are due by the clock, so a slow tick
        # is made up at the next one).
        committed = {}
        paced = payloads(int(paced_rate / fan_out * seconds) + 1)
        meter = Meter(receivers.placement)
        tick = 0.02
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < seconds:
            due = int(paced_rate / fan_out * elapsed)
            if due > len(committed):
                await publish(database, paced[len(committed) : due], committed)
            await asyncio.sleep(max(0.0, tick - (time.monotonic() - began) % tick))
        published_for = time.monotonic() - began
        _, busy = meter.read()  # while paced, before the tail drains
        expected = len(committed) * fan_out
        arrived = await receivers.wait_for(http, expected, within=120)
        cpu, _ = meter.read()
        rows.append(
            latency_row(
                f"{kind}: paced at {paced_rate:.0f}/s",
                arrived,
                committed,
                published_for,
                cpu,
                busy,
            )
        )
    stop.set()
    await worker
    await database.dispose()
    return rows


def databases_to_run(requested: str) -> tuple[str | None, list[str]]:
    """The PostgreSQL server named by the environment (or None), and which of the requested
    databases (comma-separated: sqlite, postgresql) can run: PostgreSQL only when named."""
    pg_url = os.environ.get("TUCANO_BENCH_DATABASE_URL") or os.environ.get(
        "TUCANO_TEST_DATABASE_URL"
    )
    kinds = [
        k
        for k in requested.split(",")
        if k == "sqlite" or (k in ("postgresql", "postgresql-plain") and pg_url)
    ]
    return pg_url, kinds


def table(rows: list[Row], ceiling_rate: float) -> str:
    lines = [
        f"{'scenario':<58} {'deliveries':>10} {'per second':>11} {'of ceiling':>10}"
        f" {'p50 ms':>8} {'p99 ms':>8} {'CPU us':>7} {'busy':>9}",
        "-" * 128,
    ]
    for row in rows:
        p50 = f"{row.p50_ms:.1f}" if row.p50_ms is not None else "-"
        p99 = f"{row.p99_ms:.1f}" if row.p99_ms is not None else "-"
        share = "-" if "paced" in row.name else f"{row.rate / ceiling_rate:.0%}"
        cpu = f"{row.cpu_seconds / row.deliveries * 1e6:.0f}" if row.cpu_seconds else "-"
        busy = "/".join(f"{share:.0%}" for share in row.busy) if row.busy else "-"
        lines.append(
            f"{row.name:<58} {row.deliveries:>10} {row.rate:>11.0f} {share:>10} {p50:>8} {p99:>8}"
            f" {cpu:>7} {busy:>9}"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events in the burst")
    parser.add_argument("--receivers", type=int, default=4, help="receivers (one webhook each)")
    parser.add_argument("--seconds", type=float, default=10, help="length of the paced run")
    parser.add_argument(
        "--databases",
        default="sqlite,postgresql",
        help="comma-separated: sqlite, postgresql, postgresql-plain (PostgreSQL, plain queue)",
    )
    parser.add_argument(
        "--paced-share",
        type=float,
        default=0.5,
        help="the paced runs' rate as a share of the first ceiling (the issue's target is at 0.5)",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="leave CPU placement to the operating system"
    )
    args = parser.parse_args()
    pg_url, kinds = databases_to_run(args.databases)
    placement = Placement.choose(pin=not args.no_pin)
    placement.pin(os.getpid(), placement.measured)
    tune_garbage_collector()  # as `tucano serve` and `tucano worker` do

    receivers = Receivers(args.receivers, placement)
    try:
        first = await ceiling(receivers, args.events, "first")
        paced_rate = first.rate * args.paced_share
        rows = [first, await paced_ceiling(receivers, paced_rate, args.seconds)]
        with tempfile.TemporaryDirectory() as workdir:
            for kind in kinds:
                url = await fresh_database(kind, pg_url, Path(workdir))
                try:
                    async with database_placed(url, placement):
                        rows += await run_engine(
                            kind, url, receivers, args.events, paced_rate, args.seconds
                        )
                finally:
                    if kind.startswith("postgresql") and pg_url:
                        await drop_scratch_database(pg_url, url)
        last = await ceiling(receivers, args.events, "last")
        rows.append(last)
    finally:
        receivers.stop()
    top = (first.rate + last.rate) / 2
    print(
        f"\nWebhook deliveries ({os.cpu_count()} CPUs, {placement.describe()}, "
        f"{args.receivers} receivers, concurrency {CONCURRENCY}); 'of ceiling' is against the "
        f"mean of the two ceiling runs, {top:.0f}/s; 'CPU us' is this process's CPU time (all its "
        "threads) per delivery; 'busy' is how busy this process's CPU / the receivers' and "
        "database's CPU were (left to the OS: all CPUs; paced rows: while publishing)\n"
    )
    print(table(rows, top))
    if "postgresql" not in kinds:
        print("\n(PostgreSQL skipped: set TUCANO_BENCH_DATABASE_URL to include it)")


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a benchmark's `main` on uvloop, as `tucano serve` runs."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())


if __name__ == "__main__":
    run(main)
