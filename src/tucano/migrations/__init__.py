"""Alembic migrations, shipped inside the package so an installed `tucano migrate` finds them.

PostgreSQL: the migration runs under a transaction-level advisory lock, so any number of
`tucano serve` / `tucano migrate` processes may start at once; the first migrates, the others wait
and then find the schema at head.
"""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).parent


def alembic_config(database_url: str, *, secret_key: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = database_url
    # TUCANO_SECRET_KEY, for migrations that seal secrets (0016); None: the sandbox's own key.
    config.attributes["secret_key"] = secret_key
    return config


def upgrade(database_url: str, revision: str = "head", *, secret_key: str | None = None) -> None:
    """Bring the schema to `revision`. Blocking: call it before the event loop starts, or in a
    thread. `secret_key`: TUCANO_SECRET_KEY, which seals the secrets already stored."""
    command.upgrade(alembic_config(database_url, secret_key=secret_key), revision)


def downgrade(database_url: str, revision: str, *, secret_key: str | None = None) -> None:
    command.downgrade(alembic_config(database_url, secret_key=secret_key), revision)


def schema_problem(database_url: str, *, migrating: bool) -> str | None:
    """Why this release cannot run on the database's schema, or None. `migrating`: pending
    migrations are about to be applied, so only a schema newer than this release is a problem.
    Blocking, like `upgrade`; a failure to reach the database propagates."""
    return revisions_problem(asyncio.run(_current_revisions(database_url)), migrating=migrating)


@cache
def _revisions() -> tuple[str, frozenset[str]]:
    """This release's head and every revision it knows (read from its files once)."""
    scripts = ScriptDirectory.from_config(alembic_config(""))
    head = scripts.get_current_head()
    assert head is not None
    return head, frozenset(script.revision for script in scripts.walk_revisions())


def revisions_problem(current: set[str], *, migrating: bool = False) -> str | None:
    """Why this release cannot run on a schema at the `current` revisions (its
    alembic_version rows), or None; `migrating` as for schema_problem."""
    head, known = _revisions()
    if unknown := sorted(current - known):
        return (
            f"the database's schema ({unknown[0]}) is newer than this release (whose last "
            f"migration is {head}): run the release that migrated it, or a newer one"
        )
    if migrating or current == {head}:
        return None
    if not current:
        return "the database has no schema yet: run `tucano migrate` first"
    return (
        f"the database's schema is at {', '.join(sorted(current))} and this release needs "
        f"{head}: run `tucano migrate` first"
    )


async def _current_revisions(database_url: str) -> set[str]:
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    from tucano.db.engines import create_private_sqlite_file

    create_private_sqlite_file(database_url)
    engine = create_async_engine(database_url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            heads = await connection.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_heads()
            )
    finally:
        await engine.dispose()
    return set(heads)
