"""A `tucano serve` of its own for the HTTP benchmarks: a fresh PostgreSQL database, the server
in a process of its own, and an access token of one customer."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.processes import clean_env, run_tucano, start_serve


@dataclass(frozen=True)
class Served:
    base_url: str
    database_url: str  # the scratch database, for loading data straight into it
    token: str  # of the customer asked for, with the four merchant scopes


def postgres_url() -> str:
    """The PostgreSQL server to benchmark on, or exit saying how to name one."""
    url = os.environ.get("TUCANO_BENCH_DATABASE_URL") or os.environ.get("TUCANO_TEST_DATABASE_URL")
    if not url:
        sys.exit("set TUCANO_BENCH_DATABASE_URL to a PostgreSQL database (e.g. .../test)")
    return url


async def access_token(
    base_url: str, workdir: Path, env: dict[str, str], customer_id: int, *scopes: str
) -> str:
    """A new API client of `customer_id` (`tucano clients create`, the merchant scopes unless
    `scopes` are given) and an access token of it."""
    args = ["clients", "create", "--customer-id", str(customer_id)]
    for scope in scopes:
        args += ["--scope", scope]
    created = await asyncio.to_thread(run_tucano, *args, cwd=workdir, env=env)
    client = json.loads(created.stdout)
    form = {
        "grant_type": "client_credentials",
        "client_id": client["clientId"],
        "client_secret": client["clientSecret"],
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(base_url + "/oauth/v1/token", data=form) as response,
    ):
        return str((await response.json())["access_token"])


@asynccontextmanager
async def served(pg_url: str, customer_id: int) -> AsyncIterator[Served]:
    """`tucano serve --no-worker` in production mode on a scratch database, dropped after."""
    database_url = await create_scratch_database(pg_url, prefix="tucano_bench")
    workdir = Path(tempfile.mkdtemp())
    env = clean_env(
        TUCANO_DATABASE_URL=database_url,
        TUCANO_ENVIRONMENT="production",
        TUCANO_SECRET_KEY=secrets.token_urlsafe(48),
        TUCANO_LOG_LEVEL="WARNING",
        # The benchmark measures the service, not its per-client rate limit.
        TUCANO_RATE_LIMIT="1000000/second",
    )
    server = await asyncio.to_thread(start_serve, workdir, env, "--no-worker")
    try:
        token = await access_token(server.base_url, workdir, env, customer_id)
        yield Served(server.base_url, database_url, token)
    finally:
        server.stop()
        await drop_scratch_database(pg_url, database_url)
