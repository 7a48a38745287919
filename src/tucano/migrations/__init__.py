"""Alembic migrations, shipped inside the package so an installed `tucano migrate` finds them.

PostgreSQL: the migration runs under a transaction-level advisory lock, so any number of
`tucano serve` / `tucano migrate` processes may start at once; the first migrates, the others wait
and then find the schema at head.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to `revision`. Blocking: call it before the event loop starts, or in a thread."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)
