"""Scratch PostgreSQL databases for tests and benchmarks: a fresh one beside the database a URL
names, dropped afterwards, so runs never see each other's rows."""

from __future__ import annotations

import secrets

from sqlalchemy.engine import make_url

from tucano.db.engines import connect_asyncpg


async def create_scratch_database(base_url: str, prefix: str = "tucano_test") -> str:
    """Create an empty database on the server of `base_url`; return its URL."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    connection = await connect_asyncpg(base_url)
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return make_url(base_url).set(database=name).render_as_string(hide_password=False)


async def drop_scratch_database(base_url: str, scratch_url: str) -> None:
    name = make_url(scratch_url).database
    connection = await connect_asyncpg(base_url)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await connection.close()
