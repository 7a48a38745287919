"""Schemathesis against our own OpenAPI document, on a real `tucano serve`: whatever it generates,
valid or not, gets no 5xx, a documented status, content type and body, and invalid input is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.processes import clean_env, run_tucano, start_serve
from tests.support.settings import POSTGRES_URL

SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")


def fuzz(cwd: Path, env: dict[str, str]) -> None:
    # Schemathesis sends hundreds of requests a second with one token: what it tests is the
    # answer to each, not the rate limits (tests/auth and tests/api test those).
    env = {**env, "TUCANO_RATE_LIMIT": "1000000/second", "TUCANO_TOKEN_RATE_LIMIT": "1000/second"}
    server = start_serve(cwd, env)
    try:
        created = json.loads(
            run_tucano("clients", "create", "--customer-id", "5", cwd=cwd, env=env).stdout
        )
        client = httpx.post(
            server.base_url + "/oauth/v1/token",
            data={"grant_type": "client_credentials"},
            auth=(created["clientId"], created["clientSecret"]),
        ).json()
        result = subprocess.run(
            [
                SCHEMATHESIS,
                "run",
                server.base_url + "/openapi.json",
                "--header",
                f"Authorization: Bearer {client['access_token']}",
                "--checks",
                "all",
                # Schema-valid but refused is expected where rules go beyond a schema (a public
                # host for targetUrl, real client credentials); everything else is checked.
                "--exclude-checks",
                "positive_data_acceptance",
                "--max-examples",
                "40",
                "--seed",
                "20261122",
            ],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, result.stdout[-6000:]
        assert " 5xx" not in server.logs() and "unhandled_error" not in server.logs()
    finally:
        server.stop()


def test_fuzz_on_sqlite(tmp_path: Path) -> None:
    fuzz(tmp_path, clean_env())


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")
async def test_fuzz_on_postgresql(tmp_path: Path) -> None:
    import asyncio

    url = await create_scratch_database(POSTGRES_URL)
    try:
        await asyncio.to_thread(fuzz, tmp_path, clean_env(TUCANO_DATABASE_URL=url))
    finally:
        await drop_scratch_database(POSTGRES_URL, url)
