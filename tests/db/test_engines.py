"""db.engines: the SQLite database and its WAL and shared-memory files are its owner's alone."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from tucano.db.database import Database
from tucano.migrations import upgrade


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """The umask most systems start with: files world-readable unless made otherwise."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(database_file: Path) -> dict[str, int]:
    files = [database_file, Path(f"{database_file}-wal"), Path(f"{database_file}-shm")]
    return {path.name: stat.S_IMODE(path.stat().st_mode) for path in files if path.exists()}


@pytest.mark.usefixtures("permissive_umask")
async def test_a_database_the_service_creates_is_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    database_file = tmp_path / "new.db"
    database = Database(f"sqlite+aiosqlite:///{database_file}")
    try:
        async with database.session() as session:
            await session.execute(text("CREATE TABLE notes (body TEXT)"))
            await session.execute(text("INSERT INTO notes VALUES ('x')"))
            await session.commit()
        async with database.read_session() as session:
            assert await session.scalar(text("SELECT body FROM notes")) == "x"
        found = modes(database_file)
        assert set(found) == {"new.db", "new.db-wal", "new.db-shm"}  # WAL mode, open
        assert set(found.values()) == {0o600}, found
    finally:
        await database.dispose()


@pytest.mark.usefixtures("permissive_umask")
async def test_a_database_the_migrations_create_is_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    database_file = tmp_path / "migrated.db"
    await asyncio.to_thread(upgrade, f"sqlite+aiosqlite:///{database_file}")
    assert modes(database_file)["migrated.db"] == 0o600
    assert set(modes(database_file).values()) == {0o600}
