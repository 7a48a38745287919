"""Every statement on the card attempts of a link's checkout."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from tucano.checkout.models import CardAttempt
from tucano.db.repository import Repository


class CardAttemptRepository(Repository[CardAttempt]):
    model = CardAttempt

    async def add(self, attempt: CardAttempt) -> CardAttempt:
        self.session.add(attempt)
        await self.session.flush()
        return attempt

    async def get(self, attempt_id: int) -> CardAttempt | None:
        """An attempt, read again from the database (another session may have changed it)."""
        return await self.session.get(CardAttempt, attempt_id, populate_existing=True)

    async def lock_end(self, link_id: int) -> datetime | None:
        """When the latest lock of the link's card payment ends (or ended)."""
        return await self.session.scalar(
            select(func.max(CardAttempt.locks_until)).where(CardAttempt.link_id == link_id)
        )

    async def approved(self, link_id: int) -> CardAttempt | None:
        """The approved attempt that paid the link."""
        return await self.get_one_or_none(
            select(CardAttempt)
            .where(CardAttempt.link_id == link_id, CardAttempt.status == "APPROVED")
            .order_by(CardAttempt.id.desc())
            .limit(1)
        )

    async def pending_since(self, link_id: int, since: datetime) -> int:
        """How many of the link's attempts started after `since` still wait for an answer."""
        count = await self.session.scalar(
            select(func.count())
            .select_from(CardAttempt)
            .where(
                CardAttempt.link_id == link_id,
                CardAttempt.status == "PENDING",
                CardAttempt.started_at > since,
            )
        )
        return int(count or 0)

    async def refusals_since(self, link_id: int, since: datetime) -> int:
        """How many of the link's attempts were refused at or after `since`."""
        count = await self.session.scalar(
            select(func.count())
            .select_from(CardAttempt)
            .where(
                CardAttempt.link_id == link_id,
                CardAttempt.status == "REFUSED",
                CardAttempt.finished_at >= since,
            )
        )
        return int(count or 0)
