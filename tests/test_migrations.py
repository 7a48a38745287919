"""The schema is made only by the migrations: upgrade from empty, down to nothing, up again, and
the result matches the models exactly (no drift between ORM and migrations)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests.conftest import POSTGRES_URL, _database_params, fresh_database_url
from tests.databases import drop_scratch_database
from tucano.migrations import downgrade, upgrade
from tucano.models import metadata


@pytest.fixture(params=_database_params())
async def empty_database(request: pytest.FixtureRequest, tmp_root: Path) -> AsyncIterator[str]:
    url = await fresh_database_url(request.param, tmp_root)
    yield url
    if request.param == "postgresql":
        await drop_scratch_database(POSTGRES_URL, url)


async def tables_and_drift(url: str) -> tuple[set[str], list[object]]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:

            def read(sync_connection: object) -> tuple[set[str], list[object]]:
                tables = set(inspect(sync_connection).get_table_names())  # type: ignore[arg-type]
                context = MigrationContext.configure(
                    sync_connection,  # type: ignore[arg-type]
                    opts={"compare_type": True},
                )
                return tables, list(compare_metadata(context, metadata))

            return await connection.run_sync(read)
    finally:
        await engine.dispose()


async def test_upgrade_downgrade_upgrade(empty_database: str) -> None:
    await asyncio.to_thread(upgrade, empty_database)
    tables, drift = await tables_and_drift(empty_database)
    assert set(metadata.tables) <= tables
    assert drift == []

    await asyncio.to_thread(downgrade, empty_database, "base")
    tables, _ = await tables_and_drift(empty_database)
    assert tables <= {"alembic_version"}

    await asyncio.to_thread(upgrade, empty_database)
    tables, drift = await tables_and_drift(empty_database)
    assert set(metadata.tables) <= tables
    assert drift == []


async def test_upgrade_twice_is_a_no_op(empty_database: str) -> None:
    await asyncio.to_thread(upgrade, empty_database)
    await asyncio.to_thread(upgrade, empty_database)
    _, drift = await tables_and_drift(empty_database)
    assert drift == []
