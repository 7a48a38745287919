"""The database core's driver-level paths: PostgreSQL's statement pool
(Database.driver_connection) and work run on SQLite's driver thread (run_on_sqlite)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import text

from tests.conftest import POSTGRES_URL
from tucano.db import Database, immediate_transaction, run_on_sqlite

needs_postgres = pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")


@pytest.fixture
async def sqlite_database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    async with database.session() as session:
        await session.execute(text("CREATE TABLE notes (body TEXT NOT NULL)"))
        await session.commit()
    yield database
    await database.dispose()


def _bodies(connection: sqlite3.Connection) -> list[str]:
    return [row[0] for row in connection.execute("SELECT body FROM notes ORDER BY body")]


async def test_sqlite_work_that_fails_leaves_nothing_behind(sqlite_database: Database) -> None:
    def write_then_fail(connection: sqlite3.Connection) -> None:
        with immediate_transaction(connection):
            connection.execute("INSERT INTO notes VALUES ('half done')")
            connection.execute("INSERT INTO notes VALUES (NULL)")  # NOT NULL: raises

    with pytest.raises(sqlite3.IntegrityError):
        await sqlite_database.run_on_sqlite(write_then_fail)

    def write(connection: sqlite3.Connection) -> list[str]:
        with immediate_transaction(connection):
            connection.execute("INSERT INTO notes VALUES ('done')")
        return _bodies(connection)

    # The connection is usable afterwards, and the failed work's row is gone.
    assert await sqlite_database.run_on_sqlite(write) == ["done"]


async def test_sqlite_work_joins_the_session_transaction(sqlite_database: Database) -> None:
    def write(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO notes VALUES ('with the session')")

    async with sqlite_database.session() as session:
        await session.execute(text("INSERT INTO notes VALUES ('through SQLAlchemy')"))
        await run_on_sqlite(await session.connection(), write)
        await session.rollback()
    assert await sqlite_database.run_on_sqlite(_bodies) == []

    async with sqlite_database.session() as session:
        await session.execute(text("INSERT INTO notes VALUES ('through SQLAlchemy')"))
        await run_on_sqlite(await session.connection(), write)
        await session.commit()
    assert await sqlite_database.run_on_sqlite(_bodies) == [
        "through SQLAlchemy",
        "with the session",
    ]


@pytest.mark.postgres
@needs_postgres
async def test_the_url_options_reach_the_statement_pool() -> None:
    # SQLAlchemy's spelling of the statement cache size, in the URL an operator writes.
    database = Database(POSTGRES_URL + "?prepared_statement_cache_size=0")
    try:
        async with database.driver_connection() as connection:
            assert await connection.fetchval("SELECT 41 + 1") == 42
            assert connection._stmt_cache.get_max_size() == 0
    finally:
        await database.dispose()


@pytest.mark.postgres
@needs_postgres
async def test_a_transaction_left_open_is_rolled_back_before_reuse() -> None:
    # The pool skips asyncpg's full reset; its built-in one must still end a transaction.
    database = Database(POSTGRES_URL, pool_size=1)
    try:
        async with database.driver_connection() as connection:
            await connection.execute("BEGIN")
            await connection.execute("CREATE TEMP TABLE left_open (x int)")
        async with database.driver_connection() as connection:
            assert not connection.is_in_transaction()
            assert await connection.fetchval("SELECT to_regclass('pg_temp.left_open')") is None
    finally:
        await database.dispose()


@pytest.mark.postgres
@needs_postgres
async def test_concurrent_first_uses_open_one_pool() -> None:
    database = Database(POSTGRES_URL, pool_size=2)
    try:

        async def borrow() -> object:
            async with database.driver_connection():
                return database._driver_pool

        pools = await asyncio.gather(*(borrow() for _ in range(8)))
        assert len({id(pool) for pool in pools}) == 1
    finally:
        await database.dispose()


async def test_a_lost_database_connection_is_a_503_to_retry_not_a_500(
    private_database: Database,
) -> None:
    from tests.conftest import make_settings
    from tests.helpers import assert_error_body, start_service
    from tucano.db import connect_asyncpg
    from tucano.errors import ErrorCode

    if private_database.dialect != "postgresql":
        pytest.skip("PostgreSQL: its connections can be terminated from outside")
    running = await start_service(make_settings(private_database.url), private_database)
    try:
        merchant = await running.merchant()
        link = await merchant.post(
            "/payment-link/v1",
            json={
                "payerName": "Ana",
                "registrationNumber": "52998224725",
                "amount": 10,
                "numbersInstallments": 1,
                "expirationDays": 1,
            },
            headers={"x-transaction-id": "6f1c2d3e-4a5b-4c6d-8e7f-901234567890"},
        )
        read_link = f"/payment-link/v1/{link.json()['linkPaymentUuid']}"
        requests = [("/webhook/v1/list", {}), (read_link, {"x-transaction-id": str(uuid4())})]
        for path, headers in requests * 4:  # both kinds of pool hold a few connections
            assert (await merchant.get(path, headers=headers)).status_code == 200
        admin = await connect_asyncpg(private_database.url)
        try:
            # An administrator (or a failover) ends every connection of Tucano's.
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await admin.close()
        statuses = []
        for path, headers in requests * 6:
            response = await merchant.get(
                path, headers={**headers, "x-transaction-id": str(uuid4())} if headers else {}
            )
            statuses.append(response.status_code)
            if response.status_code == 503:
                assert_error_body(response, 503, ErrorCode.UNAVAILABLE)
                assert response.headers["retry-after"] == "1"
        assert 503 in statuses and 500 not in statuses, statuses
        assert statuses[-2:] == [200, 200], statuses  # the pools heal on their own
    finally:
        await running.stop()
