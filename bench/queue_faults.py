"""The cases of bench/faults.py on the queue on NATS JetStream (TUCANO_QUEUE=nats, issue 40):
a worker, the relay's leader, or one NATS server of three killed with SIGKILL mid-load. The
hanging receiver beside healthy ones on NATS is bench/queue_hanging.py.

Each case runs on a fresh cluster of three servers (tests/support/nats_cluster.py, in a
temporary directory) and a scratch PostgreSQL database: `tucano serve --no-worker` and 2
`tucano worker` processes. Deliveries are due (events published through the batch endpoint, 500
a request, fanned out to 4 webhooks); once `kill_at` of them arrived, the fault; then a quarter
of the events, held back until then, is published: only what survives the fault can relay it.
Every delivery must arrive (by webhook-id and receiver); duplicates (at least once) are counted
and reported, and so is the time from the kill until the last delivery arrived, beside the
time the same remainder would take at the rate before the kill (the ceiling the recovery is
measured against). 30 s after the kill (past the 10 s leases and marks) the case counts what
still waits: the stream's unpulled and unacknowledged messages, and the deliveries still under
a relay's mark, those whose ticket is on the stream (pulled by the dead process,
unacknowledged) apart from those never published.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import nats
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError
from tests.support.nats_cluster import NATS_SERVER, NatsCluster, started_cluster

from bench.deployment import Deployment, deployed, open_connections
from bench.fault_cases import KILL_SETTINGS, Outcome, Tally, publish_batches
from bench.fault_receivers import FaultReceivers
from tucano.db.engines import connect_asyncpg
from tucano.deliveries.queue.nats import CONSUMER, STREAM, SUBJECT_PREFIX, servers_of
from tucano.deliveries.queue.relay import PUBLISHED_LEASE, read_ticket

DATABASE = "postgresql, NATS x3"
WORKERS = 2
RECEIVERS = 4
# A quarter of the events is published after the fault: their deliveries are relayed by
# whatever survives it, not by what was already on the stream.
PUBLISHED_AFTER = 0.25
# What the killed process had sent but not recorded comes again once its lease (10 s) runs
# out: the duplicates are counted after no arrival for this long.
QUIET_SECONDS = 15.0
# A delivery under a dead process's mark (its ticket pulled by it, or never published) waits
# the mark out (the workers' lease, 10 s here; PUBLISHED_LEASE where none is set): the case
# waits that long and more before calling it lost.
DRAIN_WITHIN_SECONDS = PUBLISHED_LEASE.total_seconds() + 120
# How often the relay's leader is looked for after a kill, and for how long.
LEADER_POLL_SECONDS = 0.05
LEADER_WITHIN_SECONDS = 60.0
# How long a worker to be killed is given to open its first connection to the receivers.
SENDING_WITHIN_SECONDS = 10.0
# When what is still waiting is counted: past the leases and marks (10 s) and a server's time
# down, so that what still waits then is waiting on something else.
HELD_BACK_AFTER = 30.0


def nats_missing() -> str | None:
    """Why the NATS cases cannot run here, or None."""
    if shutil.which(NATS_SERVER) is None:
        return f"{NATS_SERVER} is not installed"
    return None


@asynccontextmanager
async def nats_deployed(
    pg_url: str, **settings: str
) -> AsyncIterator[tuple[NatsCluster, Deployment]]:
    """A fresh cluster of three in a temporary directory and a deployment queueing on it
    (`tucano serve --no-worker`; workers started by the caller)."""
    root = Path(tempfile.mkdtemp(prefix="tucano_nats_"))
    try:
        with started_cluster(root, name="tucano-bench") as cluster:
            async with deployed(
                pg_url,
                servers=1,
                with_worker=False,
                queue="nats",
                nats_url=cluster.url,
                **{**KILL_SETTINGS, **settings},
            ) as deployment:
                yield cluster, deployment
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def relay_leader(database_url: str) -> int | None:
    """The OS pid of the process whose relay leads on this database: its lock's connection is
    named `tucano-relay <pid>`."""
    connection = await connect_asyncpg(database_url)
    try:
        names = await connection.fetch(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE application_name LIKE 'tucano-relay %' AND datname = current_database()"
        )
    finally:
        await connection.close()
    pids = [int(row["application_name"].split()[-1]) for row in names]
    return pids[0] if len(pids) == 1 else None


async def new_relay_leader(database_url: str, killed: int) -> float | None:
    """Seconds until a relay other than the killed one leads (None: none within the limit)."""
    started = time.monotonic()
    while time.monotonic() - started < LEADER_WITHIN_SECONDS:
        leader = await relay_leader(database_url)
        if leader is not None and leader != killed:
            return time.monotonic() - started
        await asyncio.sleep(LEADER_POLL_SECONDS)
    return None


async def stream_leader(cluster: NatsCluster) -> int:
    """The index of the server leading the deliveries' stream (servers are named n0, n1, n2)."""
    client = await nats.connect(servers=servers_of(cluster.url), error_cb=quiet)
    try:
        info = await client.jetstream().stream_info(STREAM)
    finally:
        await client.close()
    leader = info.cluster.leader if info.cluster else None
    if not leader:
        raise RuntimeError(f"the stream {STREAM} has no leader")
    return int(leader.removeprefix("n"))


async def sending_to(receivers: FaultReceivers, pid: int) -> int:
    """The connections process `pid` holds open to the receivers, once it holds any (a worker
    that has not started sending yet would be no fault to kill), or 0 after SENDING_WITHIN."""
    ports = set(receivers.ports["healthy"])
    deadline = time.monotonic() + SENDING_WITHIN_SECONDS
    while True:
        held = open_connections([pid], ports)[pid]
        if held or time.monotonic() >= deadline:
            return held
        await asyncio.sleep(0.01)


@dataclass
class Waiting:
    """What still waits, seen from the stream and from the database."""

    unpulled: int  # messages no worker has pulled
    unacknowledged: int  # pulled, not acknowledged (a dead worker's stay so for ACK_WAIT)
    marked: int  # deliveries under a relay's mark (`r...`) that has not run out
    ticketed: int  # of those, the ones whose ticket (delivery and mark) is on the stream


async def tickets_on_stream(js: JetStreamContext) -> set[tuple[int, str]]:
    """(delivery, mark) of every message the stream holds, read without consuming them."""
    found: set[tuple[int, str]] = set()
    seq = 1
    while True:
        try:
            message = await js.get_msg(STREAM, seq, subject=f"{SUBJECT_PREFIX}.*", next=True)
        except NotFoundError:  # none at or after seq
            return found
        ticket = read_ticket(message.data or b"")
        if ticket is not None:
            found.add((ticket.delivery, ticket.mark))
        seq = (message.seq or seq) + 1


async def held_back(cluster: NatsCluster, database_url: str) -> Waiting:
    client = await nats.connect(servers=servers_of(cluster.url), error_cb=quiet)
    try:
        js = client.jetstream()
        info = await js.consumer_info(STREAM, CONSUMER)
        on_stream = await tickets_on_stream(js)
    finally:
        await client.close()
    connection = await connect_asyncpg(database_url)
    try:
        marked = await connection.fetch(
            "SELECT id, claim_token FROM deliveries"
            " WHERE claim_token LIKE 'r%' AND lease_until > now()"
        )
    finally:
        await connection.close()
    ticketed = sum(1 for row in marked if (row["id"], row["claim_token"]) in on_stream)
    return Waiting(info.num_pending or 0, info.num_ack_pending or 0, len(marked), ticketed)


async def counting_until(
    tally: Tally, http: aiohttp.ClientSession, expected: int, until: float
) -> None:
    """Arrivals taken until the wall-clock time `until`, even once all have arrived."""
    await tally.until(http, expected, within=until - time.time())
    await asyncio.sleep(max(0.0, until - time.time()))
    await tally.take(http)


async def quiet(_error: Exception) -> None:
    """nats-py's error callback: a server of the cluster down is the case's own doing."""


def sigkill(deployment: Deployment, pid: int) -> None:
    """SIGKILL the worker process `pid`, and forget it."""
    for worker in deployment.workers:
        if worker.process.pid == pid:
            worker.process.send_signal(signal.SIGKILL)
            worker.process.wait()
            deployment.workers.remove(worker)
            return
    raise RuntimeError(f"no worker process has pid {pid}")


@dataclass
class Struck:
    """What a fault killed, when (wall clock, as the receivers' times), and, for a worker, how
    many connections it held open to the receivers then (it was sending)."""

    what: str
    at: float
    sending: int | None = None
    server: int | None = None  # the index of a server killed
    pid: int | None = None  # of a process killed


async def strike(
    kind: str, cluster: NatsCluster, deployment: Deployment, receivers: FaultReceivers
) -> Struck:
    """SIGKILL a worker that is not the relay's leader, the relay's leader, or the server that
    leads the deliveries' stream."""
    leader = await relay_leader(deployment.database_url)
    if kind == "server":
        index = await stream_leader(cluster)
        at = time.time()
        cluster.kill_server(index)
        return Struck(f"server n{index} of 3, the stream's leader", at, server=index)
    if kind == "relay":
        if leader is None:
            raise RuntimeError("no relay leads: no 'tucano-relay <pid>' connection")
        pid, what = leader, f"relay's leader, worker pid {leader}"
    else:
        pid = next(w.process.pid for w in deployment.workers if w.process.pid != leader)
        what = f"worker pid {pid} (the relay's leader is {leader})"
    sending = await sending_to(receivers, pid)
    at = time.time()
    sigkill(deployment, pid)
    return Struck(what, at, sending=sending, pid=pid)


async def nats_fault(
    kind: str, pg_url: str, deliveries: int, kill_at: float, down: float
) -> Outcome:
    """`kind` (worker, relay, server) killed once `kill_at` of the deliveries arrived; a new
    worker started at once (worker, relay), or the server started again `down` seconds later."""
    outcome = Outcome(f"NATS {kind} SIGKILL", DATABASE)
    events = -(-deliveries // RECEIVERS)
    later = int(events * PUBLISHED_AFTER)
    expected = events * RECEIVERS
    receivers = FaultReceivers(RECEIVERS)
    tally = Tally(receivers)
    found_leader: asyncio.Task[float | None] | None = None
    try:
        async with nats_deployed(pg_url) as (cluster, deployment), aiohttp.ClientSession() as http:
            await deployment.register(http, receivers.healthy_urls())
            await publish_batches(deployment, http, events - later)
            await asyncio.to_thread(deployment.start_workers, WORKERS)
            await tally.until(http, int(expected * kill_at), within=120)
            first_arrival = min(tally.first.values())
            struck = await strike(kind, cluster, deployment, receivers)
            arrived_before = len(tally.seen)
            if kind == "relay" and struck.pid is not None:
                found_leader = asyncio.create_task(
                    new_relay_leader(deployment.database_url, struck.pid)
                )
            if struck.server is None:
                await asyncio.to_thread(deployment.start_workers, 1)
            await publish_batches(deployment, http, later)
            if struck.server is not None:
                await counting_until(tally, http, expected, struck.at + down)
                arrived_down = len(tally.seen) - arrived_before
                cluster.restart_server(struck.server)
            await counting_until(tally, http, expected, struck.at + HELD_BACK_AFTER)
            arrived_by_then = len(tally.seen)
            waiting = await held_back(cluster, deployment.database_url)
            await tally.until(http, expected, within=DRAIN_WITHIN_SECONDS, quiet=QUIET_SECONDS)
            leader_after = await found_leader if found_leader else None
    finally:
        receivers.stop()
        if found_leader:
            found_leader.cancel()
    unique = len(tally.seen)
    after = sorted(at - struck.at for at in tally.first.values() if at >= struck.at)
    rate = arrived_before / (struck.at - first_arrival)
    outcome.report("deliveries due", f"{expected} ({events} events x {RECEIVERS} webhooks)")
    outcome.report("published after the kill", f"{later * RECEIVERS} of them")
    outcome.report("killed (SIGKILL)", struck.what)
    if struck.sending is not None:
        outcome.expect(
            "its connections to receivers then", struck.sending, "> 0 (sending)", struck.sending > 0
        )
    outcome.report(
        "arrived when killed", f"{arrived_before} ({arrived_before / expected:.0%}), {rate:.0f}/s"
    )
    if struck.server is not None:
        outcome.report(
            f"arrived while n{struck.server} was down", f"{arrived_down} in {down:.0f} s"
        )
    if kind == "relay":
        outcome.expect(
            "a new relay leads after",
            "-" if leader_after is None else f"{leader_after * 1000:.0f} ms",
            f"< {LEADER_WITHIN_SECONDS:.0f} s",
            leader_after is not None,
        )
    outcome.report("next arrival after the kill", f"{after[0] * 1000:.0f} ms" if after else "-")
    remainder = (expected - arrived_before) / rate
    outcome.report(
        "all arrived after the kill",
        f"{after[-1]:.1f} s (at the rate before: {remainder:.1f} s)" if after else "-",
    )
    outcome.report(
        f"{HELD_BACK_AFTER:.0f} s after the kill",
        f"{expected - arrived_by_then} to arrive; stream: {waiting.unpulled} unpulled,"
        f" {waiting.unacknowledged} unacked",
    )
    outcome.report(
        "  under a relay's mark then",
        f"{waiting.marked}: {waiting.ticketed} with their ticket on the stream,"
        f" {waiting.marked - waiting.ticketed} never published",
    )
    outcome.expect("arrived (unique webhook-id)", unique, f"= {expected}", unique == expected)
    outcome.expect("lost", expected - unique, "0", unique == expected)
    outcome.report("duplicates (at least once)", tally.duplicates())
    return outcome
