"""Workers as real processes on a fresh database beside an API process (`tucano serve
--no-worker`): the deployment, on each database, and what the tests ask of it."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.deliveries import pix_outbound
from tests.support.processes import ServeProcess, clean_env, run_tucano, start_serve
from tests.support.receivers import Receiver
from tests.support.settings import POSTGRES_URL, database_params
from tucano.core import json_codec


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
    # Idle connections are dropped before uvicorn's own 5 s keep-alive ends them: a request sent
    # on one the server is closing meanwhile gets no answer.
    limits = httpx.Limits(keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=api.base_url, timeout=30, limits=limits) as http:
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
