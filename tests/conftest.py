"""Fixtures: every database test runs on SQLite and, where TUCANO_TEST_DATABASE_URL is set, on
PostgreSQL too (a fresh database per run, made by the real migrations)."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from tests.databases import create_scratch_database, drop_scratch_database
from tests.helpers import RunningService, start_service
from tests.receivers import Receiver
from tucano.config import Settings
from tucano.db.database import Database
from tucano.migrations import upgrade

POSTGRES_URL = os.environ.get("TUCANO_TEST_DATABASE_URL", "")

# Property tests check behaviour, not speed: on a 2-core machine shared with the suite's own
# servers an example can take longer than Hypothesis's default 200 ms deadline.
hypothesis_settings.register_profile("tucano", deadline=None)
hypothesis_settings.load_profile("tucano")
TEST_SECRET_KEY = "test-secret-key-" + "x" * 32


def _database_params() -> list[Any]:
    marks = [] if POSTGRES_URL else [pytest.mark.skip(reason="TUCANO_TEST_DATABASE_URL not set")]
    return ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, *marks])]


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tucano")


async def fresh_database_url(kind: str, tmp_root: Path) -> str:
    if kind == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_root / (secrets.token_hex(4) + '.db')}"
    return await create_scratch_database(POSTGRES_URL)


@pytest.fixture(scope="session", params=_database_params())
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


@pytest.fixture(scope="module", params=_database_params())
async def private_database(
    request: pytest.FixtureRequest, tmp_root: Path
) -> AsyncIterator[Database]:
    """A migrated database of each kind for one module alone: no worker of another test claims
    from its queue."""
    url = await fresh_database_url(request.param, tmp_root)
    await asyncio.to_thread(upgrade, url)
    db = Database(url)
    yield db
    await db.dispose()
    if request.param == "postgresql":
        await drop_scratch_database(POSTGRES_URL, url)


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "environment": "sandbox",
        "secret_key": TEST_SECRET_KEY,
        "public_url": "http://127.0.0.1:8000",
        "webhook_allowed_networks": [],
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture(scope="session")
async def service(database_url: str, database: Database) -> AsyncIterator[RunningService]:
    """The service as a merchant meets it: sandbox, default settings, on a real port."""
    running = await start_service(make_settings(database_url), database)
    yield running
    await running.stop()


# Fast retries and timeouts so a retry sequence plays out in about a second, and loopback
# receivers allowed as webhook targets.
DELIVERY_SETTINGS: dict[str, Any] = {
    "webhook_allowed_networks": "127.0.0.0/8",
    "retry_schedule": "300ms,600ms",
    "delivery_timeout_seconds": 1.5,
    "delivery_slow_after_seconds": 0.3,
    "delivery_lease_seconds": 5,
    "delivery_poll_interval_seconds": 0.1,
    "maintenance_interval_seconds": 0.2,
    "webhook_deactivate_after": "4s",
    "retry_after_max_seconds": 2,
    "sandbox_autopay_delay_seconds": 0.5,
}


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
