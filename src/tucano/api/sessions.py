"""The per-request session dependencies."""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
)
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import (
    AsyncSession,
)

from tucano.db.database import Database


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One session per request; the endpoint commits what it writes, the rest is rolled back."""
    database: Database = request.app.state.database
    async with database.session() as session:
        yield session


async def get_read_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One session per read-only request (autocommit on PostgreSQL)."""
    database: Database = request.app.state.database
    async with database.read_session() as session:
        yield session


# scope="function": the session closes when the endpoint returns, before the response is sent.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session, scope="function")]
