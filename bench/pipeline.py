"""Benchmark: the whole pipeline from outside, publish through the API to receipt, one event per
request against batches, beside a bare client in the same run.

    .venv/bin/python -m bench.pipeline                         # SQLite
    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.pipeline --databases sqlite,postgresql

What runs: the receivers of bench.deliveries in a process of their own; `tucano serve` (API,
worker and scheduler in one process, as the README starts it) on a fresh database, with one
webhook per receiver; here, a publisher with an `events.publish` client:

- single: `--events` events through `POST /internal/v1/events`, `--in-flight` (32) at a time;
- batch: the same number through `POST /internal/v1/events/batch`, `--batch-size` (100) per
  request, 4 requests at a time;
- ceiling: a bare aiohttp client posting as many signed bodies to the same receivers, measured
  first and last (bench.deliveries.ceiling).

For each: events accepted per second (first request sent to last 202), and end to end, deliveries
per second from the first request sent to the last receipt, read against the ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.processes import clean_env, run_tucano, start_serve

from bench.deliveries import Placement, Receivers, ceiling, databases_to_run, run
from tucano.core import json_codec
from tucano.events.samples import sample_payload
from tucano.events.types import EventType

CUSTOMER_ID = 515151


@dataclass
class PipelineRow:
    name: str
    events: int
    deliveries: int
    accept_seconds: float | None
    total_seconds: float

    @property
    def rate(self) -> float:
        return self.deliveries / self.total_seconds


@dataclass
class Pipeline:
    base_url: str
    merchant: dict[str, str]  # headers with a merchant's token
    publisher: dict[str, str]  # headers with an events.publish token
    pid: int


async def token(http: aiohttp.ClientSession, base_url: str, client: dict[str, str]) -> str:
    form = {
        "grant_type": "client_credentials",
        "client_id": client["clientId"],
        "client_secret": client["clientSecret"],
    }
    async with http.post(base_url + "/oauth/v1/token", data=form) as response:
        return str((await response.json())["access_token"])


@contextlib.asynccontextmanager
async def served(database_url: str, workdir: Path, placement: Placement) -> AsyncIterator[Pipeline]:
    env = clean_env(
        TUCANO_DATABASE_URL=database_url,
        TUCANO_SECRET_KEY=secrets.token_urlsafe(48),
        TUCANO_LOG_LEVEL="WARNING",
        TUCANO_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        # The benchmark measures the pipeline, not the per-client rate limit.
        TUCANO_RATE_LIMIT="1000000/second",
    )
    server = await asyncio.to_thread(start_serve, workdir, env)
    placement.pin(server.process.pid, placement.measured)
    try:
        clients = [
            json.loads(
                run_tucano(
                    "clients", "create", "--customer-id", str(CUSTOMER_ID), *scope,
                    cwd=workdir, env=env,
                ).stdout
            )
            for scope in ((), ("--scope", "events.publish"))
        ]  # fmt: skip
        async with aiohttp.ClientSession() as http:
            merchant, publisher = [await token(http, server.base_url, c) for c in clients]
        yield Pipeline(
            server.base_url,
            {"Authorization": f"Bearer {merchant}"},
            {"Authorization": f"Bearer {publisher}", "content-type": "application/json"},
            server.process.pid,
        )
    finally:
        server.stop()


def events(count: int) -> list[bytes]:
    return [
        json_codec.dumps(
            {
                "eventType": "PIX_OUTBOUND",
                "customerId": CUSTOMER_ID,
                "payload": sample_payload(EventType.PIX_OUTBOUND),
            }
        )
        for _ in range(count)
    ]


async def publish(
    http: aiohttp.ClientSession, pipeline: Pipeline, path: str, bodies: list[bytes], in_flight: int
) -> None:
    queue = list(reversed(bodies))

    async def sender() -> None:
        while queue:
            body = queue.pop()
            async with http.post(
                pipeline.base_url + path, data=body, headers=pipeline.publisher
            ) as response:
                assert response.status == 202, await response.text()
                await response.read()

    await asyncio.gather(*(sender() for _ in range(in_flight)))


async def scenario(
    name: str,
    pipeline: Pipeline,
    receivers: Receivers,
    path: str,
    bodies: list[bytes],
    events_count: int,
    in_flight: int,
) -> PipelineRow:
    expected = events_count * len(receivers.ports)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as http:
        await receivers.arrivals(http)  # discard
        started = time.time()
        await publish(http, pipeline, path, bodies, in_flight)
        accepted = time.time()
        seen = await receivers.wait_for(http, expected, within=300)
    assert len({event for event, _ in seen}) >= events_count, "deliveries missing"
    last = max(at for _, at in seen)
    return PipelineRow(name, events_count, len(seen), accepted - started, last - started)


async def run_pipeline(
    kind: str, database_url: str, receivers: Receivers, args: argparse.Namespace, workdir: Path
) -> list[PipelineRow]:
    async with served(database_url, workdir, receivers.placement) as pipeline:
        async with aiohttp.ClientSession() as http:
            for url in receivers.urls():
                body = {"targetUrl": url, "eventType": "PIX_OUTBOUND"}
                async with http.post(
                    pipeline.base_url + "/webhook/v1/create", json=body, headers=pipeline.merchant
                ) as response:
                    assert response.status == 200, await response.text()
        single = await scenario(
            f"{kind}: one event per request, {args.in_flight} in flight",
            pipeline,
            receivers,
            "/internal/v1/events",
            events(args.events),
            args.events,
            args.in_flight,
        )
        batches = [
            b'{"events":[' + b",".join(events(args.batch_size)) + b"]}"
            for _ in range(args.events // args.batch_size)
        ]
        batch = await scenario(
            f"{kind}: batches of {args.batch_size}, 4 in flight",
            pipeline,
            receivers,
            "/internal/v1/events/batch",
            batches,
            len(batches) * args.batch_size,
            4,
        )
    return [single, batch]


def table(rows: list[PipelineRow], top: float) -> str:
    lines = [
        f"{'scenario':<52} {'events':>7} {'accepted/s':>11} {'deliveries/s':>13}"
        f" {'of ceiling':>10}",
        "-" * 97,
    ]
    for row in rows:
        accepted = f"{row.events / row.accept_seconds:.0f}" if row.accept_seconds else "-"
        lines.append(
            f"{row.name:<52} {row.events:>7} {accepted:>11} {row.rate:>13.0f}"
            f" {row.rate / top:>10.2f}"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--receivers", type=int, default=4, help="receivers (one webhook each)")
    parser.add_argument("--in-flight", type=int, default=32, help="single requests in flight")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--databases", default="sqlite", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--no-pin", action="store_true", help="leave CPU placement to the OS")
    args = parser.parse_args()
    pg_url, kinds = databases_to_run(args.databases)
    placement = Placement.choose(pin=not args.no_pin)
    receivers = Receivers(args.receivers, placement)
    rows: list[PipelineRow] = []
    try:
        first = await ceiling(receivers, args.events, "first")
        with tempfile.TemporaryDirectory() as tmp:
            for kind in kinds:
                workdir = Path(tmp) / kind
                workdir.mkdir()
                if kind == "postgresql" and pg_url:
                    url = await create_scratch_database(pg_url, prefix="tucano_pipeline")
                else:
                    url = f"sqlite+aiosqlite:///{workdir / 'tucano.db'}"
                try:
                    rows += await run_pipeline(kind, url, receivers, args, workdir)
                finally:
                    if kind == "postgresql" and pg_url:
                        await drop_scratch_database(pg_url, url)
        last = await ceiling(receivers, args.events, "last")
    finally:
        receivers.stop()
    top = (first.rate + last.rate) / 2
    print(
        f"\nThe pipeline from outside ({os.cpu_count()} CPUs, {placement.describe()}, "
        f"{args.receivers} webhooks per event): 'deliveries/s' runs from the first request sent "
        f"to the last receipt; the ceiling (a bare client posting the same number of signed "
        f"bodies) ran at {first.rate:.0f} and {last.rate:.0f} deliveries/s, mean {top:.0f}\n"
    )
    print(table(rows, top))


if __name__ == "__main__":
    run(main)
