"""The health checks as a load balancer meets them: readiness says 503, and why, while the
database is unreachable or its schema is not this release's."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.databases import drop_scratch_database
from tests.support.processes import free_port
from tests.support.service import (
    RunningService,
    assert_error_body,
    database_swapped,
    serving,
)
from tests.support.settings import POSTGRES_URL, database_params, fresh_database_url, make_settings
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.migrations import downgrade, upgrade

HEAD = "0020_portal_sessions"
BEFORE_HEAD = "0015_checkout"


@pytest.fixture(params=database_params())
async def behind_database(request: pytest.FixtureRequest, tmp_root: Path) -> AsyncIterator[str]:
    """A database migrated to the revision before this release's head."""
    url = await fresh_database_url(request.param, tmp_root)
    await asyncio.to_thread(upgrade, url, BEFORE_HEAD)
    yield url
    if request.param == "postgresql":
        await drop_scratch_database(POSTGRES_URL, url)


async def test_ready_when_the_database_answers_at_this_releases_schema(
    service: RunningService,
) -> None:
    answer = await service.http.get("/health/ready")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"status": "ok", "environment": "sandbox", "schemaRevision": HEAD}
    # /health stays as it was.
    assert (await service.http.get("/health")).json() == {"status": "ok", "environment": "sandbox"}


async def test_not_ready_while_the_schema_is_behind_nor_after_a_rollback(
    behind_database: str,
) -> None:
    database = Database(behind_database)
    try:
        async with serving(make_settings(behind_database), database) as service:
            behind = await service.http.get("/health/ready")
            body = assert_error_body(behind, 503, ErrorCode.UNAVAILABLE)
            assert behind.headers["Retry-After"] == "1"
            assert body["errors"] == [
                f"the database's schema is at {BEFORE_HEAD} and this release needs {HEAD}: "
                "run `tucano migrate` first"
            ]
            # The database itself answers: /health, which checks only that, says so.
            assert (await service.http.get("/health")).status_code == 200

            await asyncio.to_thread(upgrade, behind_database)
            assert (await service.http.get("/health/ready")).status_code == 200

            # A deploy rolled back with its migration: seen at the next probe, nothing cached.
            await asyncio.to_thread(downgrade, behind_database, BEFORE_HEAD)
            assert (await service.http.get("/health/ready")).status_code == 503
    finally:
        await database.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_not_ready_while_the_database_is_unreachable(
    kind: str, service: RunningService, tmp_root: Path
) -> None:
    sqlite_file = tmp_root / f"gone-{secrets.token_hex(4)}.db"
    gone = Database(
        f"sqlite+aiosqlite:///{sqlite_file}"
        if kind == "sqlite"
        else f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/tucano"  # nobody listens
    )
    if kind == "sqlite":  # the file replaced by what SQLite cannot open
        sqlite_file.unlink()
        sqlite_file.mkdir()
    try:
        async with database_swapped(service, gone):
            answers = [await service.http.get(path) for path in ("/health/ready", "/health")]
    finally:
        await gone.dispose()
    for answer in answers:
        body = assert_error_body(answer, 503, ErrorCode.UNAVAILABLE)
        assert answer.headers["Retry-After"] == "1"
        assert body["errors"] == ["the database is not reachable"]
    assert (await service.http.get("/health/ready")).status_code == 200
