"""Settings the tests run with: the database under test, and the fast retries of delivery tests."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import create_scratch_database
from tucano.config import Settings
from tucano.webhooks.secret_store import WebhookSecretStore

# Where set (CI sets it), every database test runs on this PostgreSQL too.
POSTGRES_URL = os.environ.get("TUCANO_TEST_DATABASE_URL", "")

# Strong enough for production's check (config.secret_key_weakness), as the tests run both.
TEST_SECRET_KEY = "test-secret-key-9c1f4e7a2b8d3056e4a1c9f7b2d80e6a"
# Seals and opens webhook secrets as a service with TEST_SECRET_KEY does.
TEST_SECRET_STORE = WebhookSecretStore(TEST_SECRET_KEY.encode())

# The Redis that rate-limit tests share counts through; a test using it is skipped (never
# failed) where none answers.
REDIS_URL = os.environ.get("TUCANO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

# The suite's own servers make many requests per client and fetch many tokens from 127.0.0.1:
# rate-limit tests set the limits they test; the defaults are tested in tests/test_config.py.
# The same declined test cards are refused on many links, from 127.0.0.1, all session long.
UNLIMITED = {
    "rate_limit": "1000000/second",
    "token_rate_limit": "1000000/second",
    "card_refusals_per_address": "1000000/hour",
    "card_refusals_per_card": "1000000/hour",
}


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "environment": "sandbox",
        "secret_key": TEST_SECRET_KEY,
        "public_url": "http://127.0.0.1:8000",
        "webhook_allowed_networks": [],
        **UNLIMITED,
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


def redis_settings() -> dict[str, Any]:
    """Settings that count rate limits in the test Redis, under a key prefix of one test's own;
    skips the test where Redis does not answer."""
    import redis

    try:
        with redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=1) as client:
            client.ping()
    except (redis.RedisError, OSError) as exc:
        pytest.skip(f"no Redis at {REDIS_URL} ({type(exc).__name__})")
    return {"redis_url": REDIS_URL, "redis_key_prefix": "tucano-test-" + secrets.token_hex(6)}
