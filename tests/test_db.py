"""The database core's PostgreSQL statement pool (Database.driver_connection)."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import POSTGRES_URL
from tucano.db import Database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set"),
]


async def test_the_url_options_reach_the_statement_pool() -> None:
    # SQLAlchemy's spelling of the statement cache size, in the URL an operator writes.
    database = Database(POSTGRES_URL + "?prepared_statement_cache_size=0")
    try:
        async with database.driver_connection() as connection:
            assert await connection.fetchval("SELECT 41 + 1") == 42
            assert connection._stmt_cache.get_max_size() == 0
    finally:
        await database.dispose()


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
