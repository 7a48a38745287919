"""Whether the database answers, and at which schema revisions it is: the readiness probe's
two questions, each one statement on a read session."""

from __future__ import annotations

from sqlalchemy import text

from tucano.db.database import Database

# On SQLite, a statement that reads the file (SELECT 1 reads nothing).
_ANSWERS = {"postgresql": text("SELECT 1"), "sqlite": text("SELECT count(*) FROM sqlite_master")}
# One statement that reaches the database and reads its schema's revision at once: as cheap as
# the answer's, so nothing is cached, and a schema rolled back shows at the next probe.
_REVISIONS = text("SELECT version_num FROM alembic_version")


async def check_database_answers(database: Database) -> None:
    """Raise unless the database answers a statement (on a read session: on SQLite the writing
    connection would wait for the write lock)."""
    async with database.read_session() as session:
        await session.execute(_ANSWERS[database.dialect])


async def schema_revisions(database: Database) -> set[str]:
    """The revisions in the database's alembic_version table (it raises when there is none)."""
    async with database.read_session() as session:
        return set((await session.execute(_REVISIONS)).scalars())
