"""Fixtures: every database test runs on SQLite and, where TUCANO_TEST_DATABASE_URL is set, on
PostgreSQL too (a fresh database per run, made by the real migrations)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from tests.support.databases import drop_scratch_database
from tests.support.nats_cluster import nats_cluster  # noqa: F401 - a fixture
from tests.support.receivers import Receiver
from tests.support.service import RunningService, start_service
from tests.support.settings import (
    DELIVERY_SETTINGS,
    POSTGRES_URL,
    database_params,
    fresh_database_url,
    make_settings,
)
from tucano.db.database import Database
from tucano.migrations import upgrade

# Property tests check behaviour, not speed: on a 2-core machine shared with the suite's own
# servers an example can take longer than Hypothesis's default 200 ms deadline.
hypothesis_settings.register_profile("tucano", deadline=None)
hypothesis_settings.load_profile("tucano")


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tucano")


@pytest.fixture(scope="session", params=database_params())
async def database_url(request: pytest.FixtureRequest, tmp_root: Path) -> AsyncIterator[str]:
    """A migrated database of each kind, shared by the session's tests (each its own customers)."""
    url = await fresh_database_url(request.param, tmp_root)
    await asyncio.to_thread(upgrade, url)
    yield url
    if request.param == "postgresql":
        await drop_scratch_database(POSTGRES_URL, url)


@pytest.fixture(scope="session")
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url)
    yield db
    await db.dispose()


@asynccontextmanager
async def migrated_database(kind: str, tmp_root: Path) -> AsyncIterator[Database]:
    url = await fresh_database_url(kind, tmp_root)
    await asyncio.to_thread(upgrade, url)
    db = Database(url)
    try:
        yield db
    finally:
        await db.dispose()
        if kind == "postgresql":
            await drop_scratch_database(POSTGRES_URL, url)


@pytest.fixture(scope="module", params=database_params())
async def private_database(
    request: pytest.FixtureRequest, tmp_root: Path
) -> AsyncIterator[Database]:
    """A migrated database of each kind for one module alone: no worker of another test claims
    from its queue."""
    async with migrated_database(request.param, tmp_root) as db:
        yield db


@pytest.fixture(params=database_params())
async def empty_database(request: pytest.FixtureRequest, tmp_root: Path) -> AsyncIterator[Database]:
    """A migrated database of each kind for one test alone, for what counts every customer's
    rows."""
    async with migrated_database(request.param, tmp_root) as db:
        yield db


@pytest.fixture(scope="session")
async def service(database_url: str, database: Database) -> AsyncIterator[RunningService]:
    """The service as a merchant meets it: sandbox, default settings, on a real port."""
    running = await start_service(make_settings(database_url), database)
    yield running
    await running.stop()


@pytest.fixture(scope="session")
async def delivery_service(database_url: str, database: Database) -> AsyncIterator[RunningService]:
    """The service with its delivery worker and periodic jobs (the only one per database)."""
    running = await start_service(
        make_settings(database_url, **DELIVERY_SETTINGS), database, background=True
    )
    yield running
    await running.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    started = await Receiver().start()
    yield started
    await started.stop()


@pytest.fixture(scope="session")
async def production_service(
    database_url: str, database: Database
) -> AsyncIterator[RunningService]:
    running = await start_service(make_settings(database_url, environment="production"), database)
    yield running
    await running.stop()


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("TUCANO_"):
            monkeypatch.delenv(key)
