from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tucano.db.engines import create_private_sqlite_file
from tucano.migrations.registry import metadata

# Any fixed number: the key of the advisory lock that serialises migrations on PostgreSQL.
MIGRATION_LOCK_KEY = 0x7C_A0_0001
# SQLite: how long a migration waits for another process's write lock (another migration, say).
SQLITE_LOCK_WAIT_SECONDS = 300.0


def _sqlite_at_head(connection: Connection) -> bool:
    """Whether the schema is at this release's last migration (read without any lock)."""
    if not connection.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).first():
        return False
    current = {
        row[0] for row in connection.exec_driver_sql("SELECT version_num FROM alembic_version")
    }
    return current == set(context.script.get_heads())


def _run(connection: Connection) -> None:
    if connection.dialect.name == "sqlite" and not _sqlite_at_head(connection):
        # SQLite's write lock, taken before Alembic reads the schema's revision again: a process
        # that starts while another migrates waits, then finds the schema at head. Alembic opens
        # no transaction of its own on SQLite (and the driver none for DDL), so without this two
        # processes migrating a new file at once each created tables the other had made; and a
        # migration that fails now leaves nothing half done. (At head, nothing waits for it.)
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.run_migrations()


async def _run_async(url: str) -> None:
    sqlite = url.startswith("sqlite")
    create_private_sqlite_file(url)
    engine = create_async_engine(
        url,
        poolclass=NullPool,
        connect_args={"timeout": SQLITE_LOCK_WAIT_SECONDS} if sqlite else {},
    )
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


url: str = context.config.attributes.get("database_url") or str(
    context.config.get_main_option("sqlalchemy.url")
)
if context.is_offline_mode():
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async(url))
