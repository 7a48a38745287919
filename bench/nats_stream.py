"""The NATS cluster's own ceiling, as the queue uses it: tickets published onto a replicated
work-queue stream and pulled, then acknowledged, by a durable consumer; no database, no HTTP.

    .venv/bin/python -m bench.nats_stream                   # 100,000 messages, 3 replicas
    .venv/bin/python -m bench.nats_stream --messages 20000 --replicas 1

What runs: a fresh cluster of three `nats-server` on loopback (tests/support/nats_cluster.py),
a stream shaped as `TUCANO_DELIVERIES` (file storage, work-queue retention, 64 subjects) and one
process of this benchmark that:

- publish: publishes `--messages` tickets of the relay's size (about 40 bytes), `PUBLISHING`
  (256) awaiting their acknowledgement at once, as the relay does; rate = messages / seconds;
- pull and ack: pulls them in batches of `--batch` (the worker's claim size) and acknowledges
  each, as workers do after recording; rate = messages / seconds.

Beside each row: the CPU seconds per 1,000 messages of the three servers together (from
/proc/PID/stat), which is what a cluster of real hosts spends per message, and of this client.
docs/capacity.md reads the cluster's share of a delivery from it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import nats
from nats.js import api
from tests.support.nats_cluster import started_cluster

from bench.deliveries import run
from tucano.deliveries.queue.relay import PUBLISHING, SHARDS, ticket

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


async def measure(url: str, pids: list[int], messages: int, replicas: int, batch: int) -> None:
    client = await nats.connect(servers=url.split(","))
    js = client.jetstream()
    await js.add_stream(
        name="BENCH",
        subjects=["bench.*"],
        num_replicas=replicas,
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.WORK_QUEUE,
    )
    rows = []

    def sample() -> tuple[float, float, float]:
        return time.perf_counter(), sum(cpu_seconds(p) for p in pids), cpu_seconds(os.getpid())

    started = sample()
    for start in range(0, messages, PUBLISHING):
        await asyncio.gather(
            *(
                js.publish(
                    f"bench.{n % SHARDS}",
                    ticket(n, "r" + "0" * 29),
                    headers={"Nats-Msg-Id": f"{n}.1.r"},
                )
                for n in range(start, min(messages, start + PUBLISHING))
            )
        )
    published = sample()
    rows.append(("publish (relay)", started, published))
    pull = await js.pull_subscribe(
        "bench.*",
        durable="workers",
        stream="BENCH",
        config=api.ConsumerConfig(ack_policy=api.AckPolicy.EXPLICIT, max_ack_pending=-1),
    )
    taken = 0
    while taken < messages:
        for message in await pull.fetch(batch, timeout=5):
            await message.ack()
            taken += 1
    await client.flush()
    acknowledged = sample()
    rows.append(("pull and ack (workers)", published, acknowledged))
    await client.close()

    print(f"a cluster of 3 servers on this machine, {replicas} replica(s), {messages:,} messages")
    print(f"{'step':<24} {'messages/s':>11} {'servers CPU s/1k':>17} {'client CPU s/1k':>16}")
    for name, (t0, s0, c0), (t1, s1, c1) in rows:
        print(
            f"{name:<24} {messages / (t1 - t0):>11,.0f} {(s1 - s0) / messages * 1000:>17.3f}"
            f" {(c1 - c0) / messages * 1000:>16.3f}"
        )
    print(f"machine: {os.cpu_count()} CPUs shared by the servers and this client")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    arguments = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tucano_nats_") as root,
        started_cluster(Path(root), name="tucano-bench") as cluster,
    ):
        await measure(
            cluster.url,
            [p.pid for p in cluster.processes],
            arguments.messages,
            arguments.replicas,
            arguments.batch,
        )


if __name__ == "__main__":
    run(main)
