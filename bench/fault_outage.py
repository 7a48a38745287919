"""The PostgreSQL-outage case of bench/faults.py: `tucano serve --no-worker` and `tucano worker`
on a throwaway cluster, under a steady load of API requests, while the cluster is stopped
(`pg_ctl stop -m fast`) for a while and started again; neither process is touched."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import time
from dataclasses import dataclass

import aiohttp

from bench.deployment import Deployment, deployed, event_body
from bench.fault_cases import Outcome, Tally
from bench.fault_receivers import FaultReceivers
from bench.payment_links import link_body
from bench.soak import paced
from bench.throwaway_postgres import throwaway_cluster

OPERATIONS = ("create a link", "read a link", "publish an event")
ERROR_KEYS = {"errorCode", "message", "timestamp", "xTransactionId", "errors"}
HANG_SECONDS = 5.0  # an answer slower than this, while the database is away, is a hang


@dataclass
class Answer:
    operation: str
    sent: float  # monotonic
    seconds: float
    status: int | None  # None: no answer (the error says why)
    retry_after: str | None = None
    error_body: bool = False  # the error body of decisions.md, errorCode 2
    error: str = ""


@dataclass
class Timeline:
    stopping: float = 0.0  # monotonic: pg_ctl stop run
    stopped: float = 0.0  # pg_ctl stop returned
    starting: float = 0.0
    started: float = 0.0


class Load:
    def __init__(self, deployment: Deployment, http: aiohttp.ClientSession) -> None:
        self.deployment = deployment
        self.http = http
        self.answers: list[Answer] = []
        self.links: list[str] = []
        self.acknowledged: set[str] = set()  # ids of events published with a 202
        self.turn = itertools.cycle(OPERATIONS)

    async def step(self) -> None:
        operation = next(self.turn)
        if operation == "read a link" and not self.links:
            operation = "create a link"
        base = self.deployment.servers[0].base_url
        if operation == "create a link":
            token, method, url, body = (
                self.deployment.merchant_token,
                "POST",
                base + "/payment-link/v1",
                link_body(),
            )
        elif operation == "read a link":
            token, method, url, body = (
                self.deployment.merchant_token,
                "GET",
                base + f"/payment-link/v1/{self.links[-1]}",
                None,
            )
        else:
            token, method, url = (
                self.deployment.publisher_token,
                "POST",
                base + "/internal/v1/events",
            )
            body = event_body()
        sent = time.monotonic()
        answer = Answer(operation, sent, 0.0, None)
        try:
            async with self.http.request(
                method, url, data=body, headers=self.deployment.headers(token)
            ) as response:
                answer.status = response.status
                answer.retry_after = response.headers.get("Retry-After")
                content = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            answer.error = type(exc).__name__
            content = b""
        answer.seconds = time.monotonic() - sent
        self.answers.append(answer)
        if answer.status in (200, 202):
            document = json.loads(content)
            if operation == "create a link":
                self.links.append(str(document["linkPaymentUuid"]))
            elif operation == "publish an event":
                self.acknowledged.add(str(document["eventId"]))
        elif answer.status is not None:
            try:
                document = json.loads(content)
                answer.error_body = set(document) >= ERROR_KEYS and document["errorCode"] == 2
            except ValueError:
                pass


async def postgres_outage(down_seconds: float, rate: float) -> Outcome:
    outcome = Outcome("PostgreSQL outage", "postgresql (throwaway)")
    receivers = FaultReceivers(1)
    timeline = Timeline()
    try:
        with throwaway_cluster() as cluster:
            async with (
                deployed(cluster.url, servers=1, with_worker=False) as deployment,
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
            ):
                await deployment.register(http, receivers.healthy_urls())
                deployment.start_workers(1)
                load = Load(deployment, http)
                done = asyncio.Event()

                async def outage() -> None:
                    await asyncio.sleep(5)
                    timeline.stopping = time.monotonic()
                    await asyncio.to_thread(cluster.stop)
                    timeline.stopped = time.monotonic()
                    await asyncio.sleep(down_seconds)
                    timeline.starting = time.monotonic()
                    await asyncio.to_thread(cluster.start)
                    timeline.started = time.monotonic()
                    # Load on until every operation has answered 200 again, and 5 s more.
                    for _ in range(600):  # up to 60 s
                        if recovered(load.answers, timeline.started):
                            break
                        await asyncio.sleep(0.1)
                    await asyncio.sleep(5)
                    done.set()

                async def load_until_done() -> None:
                    while not done.is_set():
                        await paced(rate, 16, time.monotonic() + 1, load.step)

                await asyncio.gather(outage(), load_until_done())
                alive = {
                    "tucano serve": deployment.servers[0].process.poll() is None,
                    "tucano worker": deployment.workers[0].process.poll() is None,
                }
                tally = Tally(receivers)
                await tally.until(http, len(load.acknowledged), within=120)
    finally:
        receivers.stop()
    judge(outcome, load, timeline, tally, alive, down_seconds)
    return outcome


def recovered(answers: list[Answer], since: float) -> dict[str, float] | None:
    """Each operation's first success sent after `since`, in seconds after it; None until all
    have one."""
    first: dict[str, float] = {}
    for answer in answers:
        if answer.sent >= since and answer.status in (200, 202):
            first.setdefault(answer.operation, answer.sent + answer.seconds - since)
    return first if len(first) == len(OPERATIONS) else None


def judge(
    outcome: Outcome,
    load: Load,
    timeline: Timeline,
    tally: Tally,
    alive: dict[str, bool],
    down_seconds: float,
) -> None:
    down = [a for a in load.answers if timeline.stopped <= a.sent < timeline.starting]
    statuses = collections.Counter(str(a.status or a.error) for a in down)
    outcome.report(
        f"answers while down ({down_seconds:g} s)",
        ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items())),
    )
    proper = [a for a in down if a.status == 503 and a.retry_after and a.error_body]
    waits = ", ".join(sorted({a.retry_after for a in proper if a.retry_after}))
    outcome.expect(
        "  503 + Retry-After + error body",
        f"{len(proper)} of {len(down)} (Retry-After: {waits or '-'})",
        "all",
        bool(down) and len(proper) == len(down),
    )
    slowest = max((a.seconds for a in down), default=0.0)
    outcome.expect(
        "  slowest answer while down", f"{slowest:.2f} s", f"< {HANG_SECONDS:g} s", slowest < 5
    )
    failed = collections.Counter(
        f"{a.operation}: {a.status or a.error}"
        for a in load.answers
        if a.status not in (200, 202, 503)
    )
    outcome.expect(
        "other answers, whole run (500s, no answer)",
        ", ".join(f"{n} x {k}" for k, n in failed.items()) or "none",
        "none",
        not failed,
    )
    after = [a for a in load.answers if a.sent >= timeline.started]
    outcome.report(
        "503s after pg_ctl start returned",
        f"{sum(a.status == 503 for a in after)} of {len(after)}",
    )
    first = recovered(load.answers, timeline.started)
    outcome.expect(
        "first 200 after it, per operation",
        ", ".join(f"{op.split()[0]} {s:.1f} s" for op, s in first.items()) if first else "never",
        "< 30 s, no process restarted",
        first is not None and max(first.values()) < 30,
    )
    outcome.expect(
        "processes still running",
        ", ".join(f"{name} {'yes' if up else 'no'}" for name, up in alive.items()),
        "all",
        all(alive.values()),
    )
    arrived = {i for i, _ in tally.seen}
    lost = len(load.acknowledged - arrived)
    outcome.report("publishes acknowledged (202)", len(load.acknowledged))
    outcome.expect("  acknowledged, not delivered", lost, "0", lost == 0)
    outcome.report(
        "pg_ctl stop / start took",
        f"{timeline.stopped - timeline.stopping:.1f} / "
        f"{timeline.started - timeline.starting:.1f} s",
    )
