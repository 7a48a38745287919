"""Settings the tests run with: the database under test, and the fast retries of delivery tests."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import create_scratch_database
from tucano.config import Settings

# Where set (CI sets it), every database test runs on this PostgreSQL too.
POSTGRES_URL = os.environ.get("TUCANO_TEST_DATABASE_URL", "")

# Strong enough for production's check (config.secret_key_weakness), as the tests run both.
TEST_SECRET_KEY = "test-secret-key-9c1f4e7a2b8d3056e4a1c9f7b2d80e6a"


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


def database_params() -> list[Any]:
    """The databases a test runs on: SQLite always, PostgreSQL where POSTGRES_URL is set."""
    marks = [] if POSTGRES_URL else [pytest.mark.skip(reason="TUCANO_TEST_DATABASE_URL not set")]
    return ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, *marks])]


async def fresh_database_url(kind: str, tmp_root: Path) -> str:
    if kind == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_root / (secrets.token_hex(4) + '.db')}"
    return await create_scratch_database(POSTGRES_URL)
