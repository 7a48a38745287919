"""Several Tucano processes on one host, sharing PROMETHEUS_MULTIPROC_DIR: each one's /metrics
adds up all of theirs; without it, each serves its own. And a page whose NATS cluster does not
answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from tests.conftest import migrated_database
from tests.support.processes import ServeProcess, clean_env, free_port, run_tucano, start_serve
from tests.support.settings import POSTGRES_URL, make_settings
from tucano.metrics.exposition import metrics_page


def live_requests(server: ServeProcess) -> float:
    page = httpx.get(server.base_url + "/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == "tucano_http_requests_total" and sample.labels["route"] == "/health/live"
    )


def start_two(tmp_path: Path, **env: str) -> tuple[ServeProcess, ServeProcess]:
    servers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        database_url = f"sqlite+aiosqlite:///{tmp_path / name / 'tucano.db'}"
        servers.append(
            start_serve(
                tmp_path / name, clean_env(TUCANO_DATABASE_URL=database_url, **env), "--no-worker"
            )
        )
    return servers[0], servers[1]


def ask_each(a: ServeProcess, b: ServeProcess) -> tuple[float, float]:
    for _ in range(3):
        assert httpx.get(a.base_url + "/health/live").status_code == 200
    for _ in range(2):
        assert httpx.get(b.base_url + "/health/live").status_code == 200
    return live_requests(a), live_requests(b)


async def test_processes_sharing_a_directory_each_serve_the_sum_of_their_metrics(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    a, b = await asyncio.to_thread(start_two, tmp_path, PROMETHEUS_MULTIPROC_DIR=str(shared))
    try:
        assert await asyncio.to_thread(ask_each, a, b) == (5, 5)
    finally:
        assert a.stop() == 0 and b.stop() == 0


async def test_without_a_shared_directory_each_process_serves_its_own(tmp_path: Path) -> None:
    a, b = await asyncio.to_thread(start_two, tmp_path)
    try:
        assert await asyncio.to_thread(ask_each, a, b) == (3, 2)
    finally:
        assert a.stop() == 0 and b.stop() == 0


def test_a_shared_directory_that_is_not_there_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "not-made"
    result = run_tucano(
        "migrate", cwd=tmp_path, env=clean_env(PROMETHEUS_MULTIPROC_DIR=str(missing))
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"tucano: PROMETHEUS_MULTIPROC_DIR: {str(missing)!r} is not a directory "
        "(create it, or unset it)\n"
    )


@pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")
async def test_a_nats_cluster_that_does_not_answer_leaves_only_the_streams_lag_out(
    tmp_path: Path,
) -> None:
    async with migrated_database("postgresql", tmp_path) as database:
        settings = make_settings(
            database.url, queue="nats", nats_url=f"nats://127.0.0.1:{free_port()}"
        )
        with capture_logs() as logs:
            page = (await metrics_page(database, settings)).decode()
    assert "\ntucano_deliveries_due " in page
    assert "tucano_queue_stream_pending_messages" not in page
    assert [e["event"] for e in logs] == ["metrics_stream_lag_unavailable"]
