"""Workers as real processes: killed mid-batch, stopped with SIGTERM, two at once on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
from sqlalchemy.engine import make_url

from tests.cli.conftest import (
    Deployment,
    all_succeeded,
    delivered_ids,
    register,
    wait_until_all_delivered,
)
from tests.support.deliveries import eventually
from tests.support.processes import start_worker
from tests.support.receivers import Receiver, hanging
from tests.support.settings import (
    POSTGRES_URL,
    database_params,
)
from tucano.cli.processes import concurrency_limit
from tucano.config import Settings
from tucano.db.engines import connect_asyncpg


async def test_a_worker_killed_mid_batch_loses_nothing(
    deployment: Deployment, receiver: Receiver
) -> None:
    receiver.behaviours["/k"] = hanging(0.2)
    await register(deployment, receiver, "/k")
    event_ids = await deployment.publish(150)

    first = start_worker(deployment.cwd, deployment.env, "first")
    try:
        await receiver.wait_for("/k", 30, timeout=30)
    finally:
        first.stop(signal.SIGKILL)
    arrived_before_kill = len(set(delivered_ids(receiver, "/k")))
    assert arrived_before_kill < len(event_ids)

    second = start_worker(deployment.cwd, deployment.env, "second")
    try:
        await wait_until_all_delivered(receiver, "/k", event_ids, within=60)
        # What the killed worker sent but never recorded is sent again once its lease runs out
        # (at least once), so every event ends with its success on record.
        await eventually(
            lambda: all_succeeded(deployment, len(event_ids)), timeout=30, what="all recorded"
        )
    finally:
        assert await asyncio.to_thread(second.stop) == 0


async def test_sigterm_finishes_in_flight_deliveries_and_nothing_is_sent_twice(
    deployment: Deployment, receiver: Receiver
) -> None:
    receiver.behaviours["/t"] = hanging(0.3)
    await register(deployment, receiver, "/t")
    event_ids = await deployment.publish(80)
    first = start_worker(deployment.cwd, deployment.env, "first")
    await receiver.wait_for("/t", 10, timeout=30)
    # Stopping waits for the process: off the event loop, where the receiver must keep answering.
    assert await asyncio.to_thread(first.stop, signal.SIGTERM, 30) == 0
    assert "delivery_worker_stopped" in first.logs()
    second = start_worker(deployment.cwd, deployment.env, "second")
    try:
        await wait_until_all_delivered(receiver, "/t", event_ids, within=60)
        await asyncio.sleep(1)
    finally:
        await asyncio.to_thread(second.stop)
    counts = delivered_ids(receiver, "/t")
    assert max(counts.values()) == 1, [i for i, n in counts.items() if n > 1][:5]
    successes = await deployment.results(status="SUCCESS", size=1)
    assert successes["totalElements"] == len(event_ids)


@pytest.mark.parametrize("deployment", [database_params()[1]], indirect=True)
async def test_two_workers_on_postgresql_deliver_each_event_once(
    deployment: Deployment, receiver: Receiver
) -> None:
    receiver.behaviours["/two"] = hanging(0.01)
    await register(deployment, receiver, "/two")
    workers = [
        start_worker(deployment.cwd, deployment.env, "a"),
        start_worker(deployment.cwd, deployment.env, "b"),
    ]
    try:
        event_ids = await deployment.publish(300)
        await wait_until_all_delivered(receiver, "/two", event_ids, within=60)
        await asyncio.sleep(1.5)
    finally:
        for worker in workers:
            await asyncio.to_thread(worker.stop)
    counts = delivered_ids(receiver, "/two")
    assert len(counts) == 300
    assert set(counts.values()) == {1}
    # Both workers took part.
    for worker in workers:
        assert "delivery_worker_started" in worker.logs()


@pytest.mark.parametrize("deployment", [database_params()[1]], indirect=True)
async def test_an_event_published_by_the_api_wakes_a_worker_in_another_process(
    deployment: Deployment, receiver: Receiver
) -> None:
    """No polling in between: PostgreSQL's NOTIFY, sent by the events endpoint's statement
    when it commits, reaches the worker's LISTEN at once."""
    await register(deployment, receiver, "/woken")
    env = {**deployment.env, "TUCANO_DELIVERY_POLL_INTERVAL_SECONDS": "60"}
    worker = start_worker(deployment.cwd, env, "listening")
    try:
        database = make_url(env["TUCANO_DATABASE_URL"]).database
        connection = await connect_asyncpg(POSTGRES_URL)
        try:

            async def listening() -> bool:
                return bool(
                    await connection.fetchval(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = $1 AND query LIKE 'LISTEN%'",
                        database,
                    )
                )

            await eventually(listening, timeout=30, what="the worker listening")
        finally:
            await connection.close()
        # The worker's first claims found nothing; only a notification wakes it before a minute.
        (event_id,) = await deployment.publish(1)
        (request,) = await receiver.wait_for("/woken", 1, timeout=10)
        assert request.headers["webhook-id"] == event_id
    finally:
        await asyncio.to_thread(worker.stop)


def test_the_concurrency_limit_stays_under_the_open_files_limit() -> None:
    settings = Settings(max_connections=5000)
    assert concurrency_limit(settings, open_files=20000) == 5000
    assert concurrency_limit(settings, open_files=1024) == 512


async def test_ctrl_c_leaves_only_warnings_from_the_libraries(deployment: Deployment) -> None:
    # As operations.md says: the database libraries log warnings only, shutting down included.
    assert (await deployment.http.get("/health/ready")).status_code == 200
    assert deployment.api.stop(signal.SIGINT) == 0
    lines = [
        json.loads(line) for line in deployment.api.logs().splitlines() if line.startswith("{")
    ]
    assert any(line["event"] == "Application shutdown complete." for line in lines)
    from_libraries = [
        line
        for line in lines
        if not line.get("logger", "").startswith(("tucano", "uvicorn"))
        and line["level"] not in ("warning", "error", "critical")
    ]
    assert from_libraries == []
    assert not [line for line in lines if "Pool" in line["event"]]
