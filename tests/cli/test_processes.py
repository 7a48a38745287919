"""Workers as real processes: killed mid-batch, stopped with SIGTERM, two at once on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.deliveries import eventually, pix_outbound
from tests.support.processes import ServeProcess, clean_env, run_tucano, start_serve, start_worker
from tests.support.receivers import Receiver, hanging
from tests.support.settings import (
    POSTGRES_URL,
    database_params,
)
from tucano.cli.processes import concurrency_limit
from tucano.config import Settings
from tucano.core import json_codec
from tucano.db.engines import connect_asyncpg


@dataclass
class Deployment:
    """An API process (no worker) on a fresh database, plus what is needed to start workers."""

    cwd: Path
    env: dict[str, str]
    api: ServeProcess
    http: httpx.AsyncClient
    publisher_token: str
    merchant_token: str
    customer_id: int = 77

    async def publish(self, count: int) -> list[str]:
        async def one() -> str:
            response = await self.http.post(
                "/internal/v1/events",
                content=json_codec.dumps(
                    {
                        "eventType": "PIX_OUTBOUND",
                        "customerId": self.customer_id,
                        "payload": pix_outbound(),
                    }
                ),
                headers={
                    "Authorization": f"Bearer {self.publisher_token}",
                    "content-type": "application/json",
                },
            )
            assert response.status_code == 202, response.text
            return str(response.json()["eventId"])

        ids: list[str] = []
        for start in range(0, count, 25):
            ids += await asyncio.gather(*(one() for _ in range(min(25, count - start))))
        return ids

    async def results(self, **params: Any) -> dict[str, Any]:
        response = await self.http.get(
            "/webhook/v1/list/results",
            params=params,
            headers={"Authorization": f"Bearer {self.merchant_token}"},
        )
        return dict(response.json())


def _token(base_url: str, cwd: Path, env: dict[str, str], *scopes: str) -> str:
    args = ["clients", "create", "--customer-id", "77"]
    for scope in scopes:
        args += ["--scope", scope]
    client = json.loads(run_tucano(*args, cwd=cwd, env=env).stdout)
    response = httpx.post(
        base_url + "/oauth/v1/token",
        data={"grant_type": "client_credentials"},
        auth=(client["clientId"], client["clientSecret"]),
    )
    return str(response.json()["access_token"])


@pytest.fixture(params=database_params())
async def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Deployment]:
    url = (
        f"sqlite+aiosqlite:///{tmp_path / 'tucano.db'}"
        if request.param == "sqlite"
        else await create_scratch_database(POSTGRES_URL)
    )
    env = clean_env(
        TUCANO_DATABASE_URL=url,
        TUCANO_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        # This test publishes as fast as it can: the rate limits are not what it measures.
        TUCANO_RATE_LIMIT="1000000/second",
        TUCANO_DELIVERY_LEASE_SECONDS="5",
        TUCANO_DELIVERY_TIMEOUT_SECONDS="2",
        TUCANO_DELIVERY_POLL_INTERVAL_SECONDS="0.2",
        TUCANO_RETRY_SCHEDULE="500ms,1s,1s,1s",
    )
    api = await asyncio.to_thread(start_serve, tmp_path, env, "--no-worker")
    publisher = await asyncio.to_thread(_token, api.base_url, tmp_path, env, "events.publish")
    merchant = await asyncio.to_thread(_token, api.base_url, tmp_path, env)
    async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
        yield Deployment(tmp_path, env, api, http, publisher, merchant)
    api.stop()
    if request.param == "postgresql":
        await drop_scratch_database(POSTGRES_URL, url)


async def register(deployment: Deployment, receiver: Receiver, path: str) -> None:
    response = await deployment.http.post(
        "/webhook/v1/create",
        json={"targetUrl": receiver.url(path), "eventType": "PIX_OUTBOUND"},
        headers={"Authorization": f"Bearer {deployment.merchant_token}"},
    )
    assert response.status_code == 200, response.text


async def all_succeeded(deployment: Deployment, count: int) -> bool:
    succeeded = await deployment.results(status="SUCCESS", size=100)
    if succeeded["totalElements"] < count:
        return False
    event_ids: set[str] = set()
    for page in range(succeeded["totalPages"]):
        content = (await deployment.results(status="SUCCESS", size=100, page=page))["content"]
        event_ids |= {r["eventId"] for r in content}
    return len(event_ids) == count


def delivered_ids(receiver: Receiver, path: str) -> Counter[str]:
    return Counter(r.headers["webhook-id"] for r in receiver.at(path))


async def wait_until_all_delivered(
    receiver: Receiver, path: str, event_ids: list[str], within: float
) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while set(delivered_ids(receiver, path)) != set(event_ids):
        if asyncio.get_running_loop().time() > deadline:
            missing = set(event_ids) - set(delivered_ids(receiver, path))
            raise AssertionError(f"{len(missing)} of {len(event_ids)} events never arrived")
        await asyncio.sleep(0.1)


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
