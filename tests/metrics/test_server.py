"""`tucano worker`'s own /metrics port, as Prometheus scrapes it: the delivery metrics and the
backlog from the worker's database, under the same token rule as `tucano serve`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.databases import drop_scratch_database
from tests.support.processes import clean_env, free_port, start_worker, wait_for_port
from tests.support.service import assert_error_body
from tests.support.settings import POSTGRES_URL, TEST_SECRET_KEY, database_params
from tucano.core.errors import ErrorCode

TOKEN = "worker-metrics-token-0e5d7c3a91f4b82d6e"


@pytest.fixture(params=database_params())
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database of each kind, left for the worker to migrate."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'tucano.db'}"
        return
    from tests.support.databases import create_scratch_database

    url = await create_scratch_database(POSTGRES_URL)
    yield url
    await drop_scratch_database(POSTGRES_URL, url)


async def test_the_worker_serves_its_metrics_on_the_port_it_is_given(
    database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = clean_env(TUCANO_DATABASE_URL=database_url)
    worker = await asyncio.to_thread(
        start_worker, tmp_path, env, "worker", "--metrics-port", str(port)
    )
    try:
        await asyncio.to_thread(wait_for_port, worker, port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            page = await http.get("/metrics")
            assert page.status_code == 200
            assert page.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
            families = {f.name: f for f in text_string_to_metric_families(page.text)}
            assert {"tucano_delivery_attempts", "tucano_delivery_latency_seconds"} <= set(families)
            (due,) = families["tucano_deliveries_due"].samples
            assert due.value == 0
            assert_error_body(await http.get("/health"), 404, ErrorCode.ROUTE_NOT_FOUND)
    finally:
        assert await asyncio.to_thread(worker.stop) == 0


async def test_in_production_the_workers_metrics_answer_only_to_the_token(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = clean_env(
        TUCANO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tucano.db'}",
        TUCANO_ENVIRONMENT="production",
        TUCANO_SECRET_KEY=TEST_SECRET_KEY,
        TUCANO_METRICS_TOKEN=TOKEN,
        TUCANO_METRICS_PORT=str(port),  # the setting, rather than --metrics-port
    )
    worker = await asyncio.to_thread(start_worker, tmp_path, env)
    try:
        await asyncio.to_thread(wait_for_port, worker, port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"}):
                refused = await http.get("/metrics", headers=headers)
                assert_error_body(refused, 404, ErrorCode.ROUTE_NOT_FOUND)
            allowed = await http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            assert allowed.status_code == 200
            assert "tucano_deliveries_due" in allowed.text
    finally:
        assert await asyncio.to_thread(worker.stop) == 0
