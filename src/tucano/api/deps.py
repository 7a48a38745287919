"""Typed dependencies of every route: the settings, the database and its sessions, and the
objects the application makes once at start-up (app.py). The one module that reads the
application's state; routes declare what they need by type."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.config import Settings
from tucano.db.database import Database

T = TypeVar("T")


def made_at_start(request: Request, name: str, kind: type[T]) -> T:
    """The object app.py made at start-up under `name`, for a dependency that already takes the
    request: one level of FastAPI's dependency resolution less than asking for it by type."""
    found = getattr(request.app.state, name)
    if not isinstance(found, kind):
        raise TypeError(f"app.state.{name} is a {type(found).__name__}, not a {kind.__name__}")
    return found


def provided(name: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency that gives the object app.py made at start-up under `name`."""

    # async: FastAPI runs a plain `def` dependency in a thread pool, which costs more than this.
    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, name)

    return dependency


SettingsDep = Annotated[Settings, Depends(provided("settings"))]
DatabaseDep = Annotated[Database, Depends(provided("database"))]


async def get_session(database: DatabaseDep) -> AsyncIterator[AsyncSession]:
    """One session per request; the endpoint commits what it writes, the rest is rolled back."""
    async with database.session() as session:
        yield session


async def get_read_session(database: DatabaseDep) -> AsyncIterator[AsyncSession]:
    """One read session per request that only reads."""
    async with database.read_session() as session:
        yield session


# scope="function": the session closes when the endpoint returns, before the response is sent.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session, scope="function")]
