"""`tucano worker` processes on the queue on NATS (a cluster of three): the process leading the
relay killed with SIGKILL, another taking over, nothing lost."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from tests.cli.conftest import Deployment, delivered_ids, register, wait_until_all_delivered
from tests.support.nats_cluster import NatsCluster
from tests.support.processes import ServeProcess, start_worker
from tests.support.receivers import Receiver
from tests.support.settings import database_params
from tucano.db.engines import connect_asyncpg
from tucano.deliveries.queue.nats import RELAY_NAME

pytestmark = pytest.mark.parametrize("deployment", [database_params()[1]], indirect=True)


async def relay_leaders(deployment: Deployment) -> list[int]:
    """The OS pids of the processes whose connection leads the relay on this database."""
    connection = await connect_asyncpg(deployment.env["TUCANO_DATABASE_URL"])
    try:
        rows = await connection.fetch(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE $1",
            f"{RELAY_NAME} %",
        )
    finally:
        await connection.close()
    return [int(row[0].rsplit(" ", 1)[1]) for row in rows]


async def test_the_relays_process_killed_another_takes_over_and_nothing_is_lost(
    deployment: Deployment, receiver: Receiver, nats_cluster: NatsCluster
) -> None:
    deployment.env |= {
        "TUCANO_QUEUE": "nats",
        "TUCANO_NATS_URL": nats_cluster.url,
        "TUCANO_NATS_STREAM": "TUCANO_DELIVERIES_" + uuid.uuid4().hex[:8],  # its own
    }
    await register(deployment, receiver, "/n")
    workers: list[ServeProcess] = [
        start_worker(deployment.cwd, deployment.env, "a"),
        start_worker(deployment.cwd, deployment.env, "b"),
    ]
    try:
        first = await deployment.publish(100)
        await wait_until_all_delivered(receiver, "/n", first, within=60)
        (leader,) = await relay_leaders(deployment)
        (killed,) = [w for w in workers if w.process.pid == leader]
        (survivor,) = [w for w in workers if w is not killed]
        # Killed while events keep coming: what it marked and never published, and what it held,
        # comes back once its mark or lease runs out.
        publishing = asyncio.create_task(deployment.publish(200))
        await asyncio.sleep(0.2)
        killed.stop(signal.SIGKILL)
        second = await publishing
        await wait_until_all_delivered(receiver, "/n", first + second, within=90)
        assert await relay_leaders(deployment) == [survivor.process.pid]
        assert "nats_relay_leading" in survivor.logs()
    finally:
        for worker in workers:
            await asyncio.to_thread(worker.stop)
    assert set(delivered_ids(receiver, "/n")) == set(first + second)
