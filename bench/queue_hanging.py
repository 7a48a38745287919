"""The hanging-receiver case of bench/faults.py on the queue on NATS JetStream (issue 40): paced
events to 2 healthy receivers, first alone and then beside one webhook on a receiver that reads
each request and never answers, with 2 `tucano worker` processes on a cluster of three
(bench/queue_faults.py). The healthy deliveries' p99 beside it must stay within the margin of
bench/fault_cases.py of the run alone, none lost, and the per-host cap must hold: no worker
process ever has more than TUCANO_DELIVERY_CONCURRENCY_PER_TARGET connections open to the
hanging host (sampled from /proc), nor the hanging host more than that times the workers.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import aiohttp

from bench.deployment import open_connections
from bench.fault_cases import Outcome, healthy_held_up, paced_deliveries
from bench.fault_receivers import FaultReceivers
from bench.queue_faults import DATABASE, WORKERS, nats_deployed

# Below what the hanging host would hold (events a second times the 5 s timeout), so the cap
# is reached in each run and its bound is what is measured.
PER_TARGET = 8
SAMPLE_SECONDS = 0.05


async def nats_hanging(pg_url: str, seconds: float, rate: float) -> Outcome:
    """Healthy receivers alone, then beside a hanging one, on the queue on NATS."""
    outcome = Outcome("NATS receiver hangs", DATABASE)
    receivers = FaultReceivers(2)
    hang_url = receivers.misbehaving_urls()["hang"]
    hang_port = int(receivers.ports["hang"])
    most: Counter[int] = Counter()
    try:
        async with (
            nats_deployed(pg_url, delivery_concurrency_per_target=str(PER_TARGET)) as (
                _,
                deployment,
            ),
            aiohttp.ClientSession() as http,
        ):
            await deployment.register(http, receivers.healthy_urls())
            await asyncio.to_thread(deployment.start_workers, WORKERS)
            pids = [w.process.pid for w in deployment.workers]
            # Warm-up, through the same endpoint: imports, pools, the stream and its consumer.
            await paced_deliveries(deployment, receivers, http, rate, 3)

            alone = await paced_deliveries(deployment, receivers, http, rate, seconds)
            await deployment.register(http, [hang_url])

            async def sample() -> None:
                while True:
                    for pid, held in open_connections(pids, {hang_port}).items():
                        most[pid] = max(most[pid], held)
                    await asyncio.sleep(SAMPLE_SECONDS)

            sampler = asyncio.create_task(sample())
            try:
                beside = await paced_deliveries(deployment, receivers, http, rate, seconds)
            finally:
                sampler.cancel()
            sent = (await receivers.counts(http)).get("hang", 0)
            open_at_most = (await receivers.most_open(http)).get("hang", 0)
    finally:
        receivers.stop()
    healthy_held_up(outcome, alone, beside, "beside hanging")
    outcome.expect(
        "requests to the hanging host",
        sent,
        f"> {PER_TARGET * WORKERS}",
        sent > PER_TARGET * WORKERS,
    )
    per_process = " / ".join(str(most[pid]) for pid in pids)
    outcome.expect(
        "open to it per worker, most (sampled)",
        per_process,
        f"each <= {PER_TARGET} (per-host cap)",
        all(most[pid] <= PER_TARGET for pid in pids) and max(most.values(), default=0) > 0,
    )
    outcome.expect(
        "open at the hanging host, most at once",
        open_at_most,
        f"<= {PER_TARGET * WORKERS} ({WORKERS} workers)",
        0 < open_at_most <= PER_TARGET * WORKERS,
    )
    return outcome
