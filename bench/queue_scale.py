"""The queue on NATS JetStream against the queue in the database: delivery throughput with 1, 2
and 4 `tucano worker` processes, beside bare clients, and PostgreSQL's load per delivery.

    .venv/bin/python -m bench.queue_scale                 # 5000 events x 4 webhooks a row
    .venv/bin/python -m bench.queue_scale --events 500 --workers 1,2 --verbose

What runs: a PostgreSQL cluster of the benchmark's own (bench/throwaway_postgres.py, with
pg_stat_statements), so that nothing else on a shared server counts, and a fresh NATS cluster of
three servers (tests/support/nats_cluster.py); receivers (bench/receivers.py) with one
PIX_OUTBOUND webhook each. For each mode (`TUCANO_QUEUE=database`, then `nats`) two `tucano
serve --no-worker` on a fresh database, and for each worker count (`--workers`) a backlog of
`--events` events published through `POST /internal/v1/events` while no worker runs; then that
many `tucano worker` processes start, with default settings, and drain it (bench/scaleout.py).

- per second: deliveries / (last receipt - first receipt), so start-up is left out.
- of ceiling: against the mean of as many bare clients (bench/bare_client.py: processes posting
  the same signed bodies to the same receivers at a worker's concurrency, nothing read or
  written in a database), measured first and last in the same run.
- CPU us per delivery: the workers' (first to last receipt), PostgreSQL's (every process of the
  cluster, autovacuum included) and the NATS servers' (both from the workers' start until the
  last attempt is recorded), from /proc.
- statements, blocks and WAL bytes per delivery: pg_stat_statements' calls of the workers (who
  connect as a role of their own; BEGIN and COMMIT count) and the shared buffer blocks they hit
  or read (the work of finding and changing rows), and the WAL written by anyone, from the
  workers' start until the last attempt is recorded (no delivery left in the table), divided by
  the deliveries made. Each backlog is published after a CHECKPOINT and the cluster makes none
  of its own meanwhile, so every row pays the same full-page images.
- busy: how busy the machine's CPUs were over the drain (every process here shares them).
- publishing: the servers' statements and the WAL per event while the backlogs were published
  (no worker runs then, so they are the same in both modes).

After the table, the workers' statements called most per delivery, by kind (`--top`), in each
mode at the first worker count (every count with --verbose), with the rows, buffer blocks and
execution time of each call: where the figures per delivery come from. Exits 1 if any
delivery is missing or left unrecorded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from tests.support.nats_cluster import NatsCluster, started_cluster

from bench.deliveries import Placement, Receivers, run
from bench.deployment import Deployment, deployed
from bench.pg_load import (
    SERVICE_ROLE,
    SETTINGS,
    WORKER_ROLE,
    Load,
    LoadMeter,
    Statement,
    as_role,
    emptied,
    prepared,
)
from bench.scaleout import Row, backlog, bare_clients, cpu_seconds, drained
from bench.throwaway_postgres import Cluster, throwaway_cluster

MODES = ("database", "nats")
# How long the last attempts may take to be recorded after the last receipt.
RECORDED_WITHIN_SECONDS = 60


@dataclass
class DrainRow(Row):
    """A drain, with the load it put on PostgreSQL and on NATS, each per delivery."""

    mode: str = ""
    workers: int = 0
    postgres_cpu_us: float | None = None
    nats_cpu_us: float | None = None
    statements: float | None = None
    blocks: float | None = None
    wal_bytes: float | None = None
    top: list[Statement] = field(default_factory=list)


@dataclass
class Publishing:
    """What publishing the backlogs cost PostgreSQL, summed over one mode's backlogs."""

    events: int = 0
    statements: int = 0
    wal_bytes: int = 0


@dataclass
class Results:
    args: argparse.Namespace
    receivers: Receivers
    postgres: Cluster
    nats: NatsCluster
    meter: LoadMeter
    rows: list[DrainRow] = field(default_factory=list)
    publishing: dict[str, Publishing] = field(default_factory=dict)
    lost: int = 0  # deliveries missing at the receivers
    unrecorded: int = 0  # drains whose deliveries' table did not empty


def per_delivery(value: float, row: Row) -> float:
    return value / max(1, row.deliveries)


async def one_drain(
    results: Results, deployment: Deployment, http: aiohttp.ClientSession, mode: str, count: int
) -> None:
    """Publish a backlog, drain it with `count` workers, and add its row."""
    fan_out = len(results.receivers.urls())
    await results.meter.checkpoint()
    await results.meter.start()
    sent_at = await backlog(deployment, http, results.args.events)
    published = await results.meter.read(SERVICE_ROLE)
    spent = results.publishing.setdefault(mode, Publishing())
    spent.events += len(sent_at)
    spent.statements += published.statements
    spent.wal_bytes += published.wal_bytes

    await results.meter.start()
    nats_pids = [p.pid for p in results.nats.processes]
    nats_cpu = cpu_seconds(nats_pids)
    workers = f"{count} worker{'s' if count > 1 else ''}"
    drain, lost = await drained(
        deployment,
        results.receivers,
        http,
        count,
        sent_at,
        f"{mode}: {workers}, {results.args.events} events x {fan_out}",
    )
    if not await emptied(deployment.database_url, "deliveries", RECORDED_WITHIN_SECONDS):
        results.unrecorded += 1
    load: Load = await results.meter.read(WORKER_ROLE, results.args.top)
    nats_spent = cpu_seconds(nats_pids) - nats_cpu
    await asyncio.to_thread(deployment.stop_workers)
    results.lost += lost
    results.rows.append(
        DrainRow(
            drain.name,
            drain.deliveries,
            drain.seconds,
            ceiling=drain.ceiling,
            cpu_us=drain.cpu_us,
            busy=drain.busy,
            mode=mode,
            workers=count,
            postgres_cpu_us=per_delivery(load.cpu_seconds, drain) * 1e6,
            nats_cpu_us=per_delivery(nats_spent, drain) * 1e6 if mode == "nats" else None,
            statements=per_delivery(load.statements, drain),
            blocks=per_delivery(load.blocks, drain),
            wal_bytes=per_delivery(load.wal_bytes, drain),
            top=load.top,
        )
    )


async def one_mode(results: Results, mode: str, postgres_url: str) -> None:
    settings = {"queue": mode}
    if mode == "nats":
        settings["nats_url"] = results.nats.url
    async with (
        deployed(postgres_url, servers=2, with_worker=False, **settings) as deployment,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http,
    ):
        await deployment.register(http, results.receivers.urls())
        # The workers, started after this, connect as a role of their own: their statements
        # are counted apart from the servers'.
        deployment.env["TUCANO_DATABASE_URL"] = as_role(deployment.database_url, WORKER_ROLE)
        for count in results.args.workers:
            await one_drain(results, deployment, http, mode, count)


def cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(results: Results, ceilings: dict[str, float], bare: list[Row]) -> str:
    lines = [
        f"{'':<38} {'':>10} {'':>8} {'':>7} {'CPU us per delivery':^23}"
        f" {'PostgreSQL per delivery':^25} {'':>5}",
        f"{'scenario':<38} {'deliveries':>10} {'per s':>8} {'of ceil':>7}"
        f" {'workers':>7} {'PG':>7} {'NATS':>7} {'stmts':>7} {'blocks':>6} {'WAL B':>10}"
        f" {'busy':>5}",
        "-" * 119,
    ]
    for row in [*bare[: len(bare) // 2], *results.rows, *bare[len(bare) // 2 :]]:
        share = f"{row.rate / ceilings[row.ceiling]:.0%}" if row.ceiling in ceilings else "-"
        drain = row if isinstance(row, DrainRow) else DrainRow(row.name, 0, 0)
        lines.append(
            f"{row.name:<38} {row.deliveries:>10} {row.rate:>8.0f} {share:>7}"
            f" {cell(row.cpu_us, '.0f'):>7} {cell(drain.postgres_cpu_us, '.0f'):>7}"
            f" {cell(drain.nats_cpu_us, '.0f'):>7} {cell(drain.statements, '.3f'):>7}"
            f" {cell(drain.blocks, '.1f'):>6}"
            f" {cell(drain.wal_bytes, ',.0f'):>10} {cell(row.busy, '.0%'):>5}"
        )
    for mode, spent in results.publishing.items():
        events = max(1, spent.events)
        lines.append(
            f"{mode + ': publishing, per event':<38} {spent.events:>10} {'':>8} {'':>7}"
            f" {'':>7} {'':>7} {'':>7} {spent.statements / events:>7.3f} {'':>6}"
            f" {spent.wal_bytes / events:>10,.0f} {'':>5}"
        )
    return "\n".join(lines)


def top_statements(results: Results) -> str:
    lines = [
        f"{'mode, workers':<14} {'calls per delivery':>18} {'rows':>6} {'blocks':>6}"
        f" {'us':>6}  statement (rows, buffer blocks and execution time per call)",
        "-" * 119,
    ]
    for row in results.rows:
        if results.args.verbose or row.workers == results.args.workers[0]:
            for s in row.top:
                calls = max(1, s.calls)
                lines.append(
                    f"{f'{row.mode}, {row.workers}':<14} {per_delivery(s.calls, row):>18.3f}"
                    f" {s.rows / calls:>6.1f} {s.blocks / calls:>6.1f}"
                    f" {s.exec_ms / calls * 1000:>6.0f}  {s.query[:56]}"
                )
    return "\n".join(lines)


@contextmanager
def clusters() -> Iterator[tuple[Cluster, NatsCluster]]:
    with (
        tempfile.TemporaryDirectory(prefix="tucano_nats_") as root,
        started_cluster(Path(root), name="tucano-bench") as nats,
        throwaway_cluster(SETTINGS) as postgres,
    ):
        yield postgres, nats


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000, help="events in each backlog")
    parser.add_argument("--receivers", type=int, default=4, help="receivers (one webhook each)")
    parser.add_argument(
        "--workers", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2, 4]
    )
    parser.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    parser.add_argument("--top", type=int, default=5, help="statements listed per row")
    parser.add_argument("--verbose", action="store_true", help="top statements of every row")
    args = parser.parse_args()
    receivers = Receivers(args.receivers, Placement(None, None))
    counts = sorted(set(args.workers))
    try:
        with clusters() as (postgres, nats):
            results = Results(args, receivers, postgres, nats, LoadMeter(postgres))
            service_url = await prepared(postgres)
            first = [await bare_clients(receivers, n, args.events) for n in counts]
            for mode in args.modes:
                await one_mode(results, mode, service_url)
            last = [await bare_clients(receivers, n, args.events) for n in counts]
    finally:
        receivers.stop()
    ceilings = {a.name: (a.rate + b.rate) / 2 for a, b in zip(first, last, strict=True)}
    print(
        f"\nThe queue on NATS against the queue in the database ({os.cpu_count()} CPUs shared "
        f"by every process): two `tucano serve --no-worker`, {args.receivers} receivers, a "
        "3-server NATS cluster and a PostgreSQL cluster of the run's own; 'of ceil' is against "
        "the mean of as many bare clients measured first and last; per delivery: CPU time of "
        "the workers, PostgreSQL and NATS; the workers' statements and the buffer blocks they "
        "touched; the WAL written\n"
    )
    print(table(results, ceilings, [*first, *last]))
    print("\nThe workers' statements called most per delivery, by kind:\n")
    print(top_statements(results))
    print(f"\nmissing deliveries: {results.lost}; drains left unrecorded: {results.unrecorded}")
    sys.exit(1 if results.lost or results.unrecorded else 0)


if __name__ == "__main__":
    run(main)
