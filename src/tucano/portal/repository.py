"""Every statement on portal_sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update

from tucano.db.repository import Repository
from tucano.portal.models import PortalSession

# Expired sessions deleted per statement by the pruning job.
PRUNE_BATCH = 1000


class PortalSessionRepository(Repository[PortalSession]):
    model = PortalSession

    async def add(self, portal_session: PortalSession) -> PortalSession:
        self.session.add(portal_session)
        await self.session.flush()
        return portal_session

    async def start(
        self, *, start_token_hash: str, cookie_hash: str, now: datetime
    ) -> PortalSession | None:
        """Use the start token, in one statement (two browsers racing on one URL: one wins):
        the session it opens, with its cookie's hash set, or None when the token is unknown,
        used or expired."""
        started = await self.session.execute(
            update(PortalSession)
            .where(
                PortalSession.start_token_hash == start_token_hash,
                PortalSession.started_at.is_(None),
                PortalSession.expires_at > now,
            )
            .values(started_at=now, cookie_hash=cookie_hash)
            .returning(PortalSession)
            .execution_options(synchronize_session=False)
        )
        return started.scalars().one_or_none()

    async def by_start_token(self, start_token_hash: str) -> PortalSession | None:
        return await self.get_one_or_none(
            select(PortalSession).where(PortalSession.start_token_hash == start_token_hash)
        )

    async def open_by_cookie(self, cookie_hash: str, *, now: datetime) -> PortalSession | None:
        """The session this cookie holds, while it has neither expired nor been ended."""
        return await self.get_one_or_none(
            select(PortalSession).where(
                PortalSession.cookie_hash == cookie_hash,
                PortalSession.expires_at > now,
                PortalSession.ended_at.is_(None),
            )
        )

    async def end(self, session_id: int, *, now: datetime) -> None:
        await self.session.execute(
            update(PortalSession)
            .where(PortalSession.id == session_id, PortalSession.ended_at.is_(None))
            .values(ended_at=now)
            .execution_options(synchronize_session=False)
        )

    async def prune(self, *, expired_before: datetime) -> int:
        """Delete a batch of sessions that expired before `expired_before`; how many went."""
        expired = (
            select(PortalSession.id)
            .where(PortalSession.expires_at < expired_before)
            .limit(PRUNE_BATCH)
            .scalar_subquery()
        )
        gone = await self.session.execute(
            delete(PortalSession).where(PortalSession.id.in_(expired))
        )
        return int(getattr(gone, "rowcount", 0) or 0)
