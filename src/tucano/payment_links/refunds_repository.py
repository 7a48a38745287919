"""Every statement on payment links' refunds, and on the columns of a link that follow them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, update

from tucano.db.repository import Repository, in_parts
from tucano.payment_links.models import PaymentLink, Refund

PENDING, SUCCEEDED, FAILED = "PENDING", "SUCCEEDED", "FAILED"


class RefundRepository(Repository[Refund]):
    model = Refund

    async def by_key(self, *, customer_id: int, key: uuid.UUID) -> Refund | None:
        """The customer's refund asked for with this x-transaction-id."""
        return await self.get_one_or_none(
            self.scoped(customer_id).where(Refund.idempotency_key == key)
        )

    async def by_uuid(self, refund_uuid: uuid.UUID, *, for_update: bool = False) -> Refund | None:
        statement = select(Refund).where(Refund.uuid == refund_uuid)
        if for_update:
            statement = statement.with_for_update()
        return await self.get_one_or_none(statement.execution_options(populate_existing=True))

    async def get_for_update(self, refund_id: int) -> Refund | None:
        return await self.session.get(
            Refund, refund_id, with_for_update=True, populate_existing=True
        )

    async def committed_cents(self, link_id: int) -> int:
        """What the link's refunds that have not failed give back, or will."""
        return int(
            await self.session.scalar(
                select(func.coalesce(func.sum(Refund.amount_cents), 0)).where(
                    Refund.link_id == link_id, Refund.status != FAILED
                )
            )
            or 0
        )

    async def add(self, refund: Refund) -> Refund:
        self.session.add(refund)
        await self.session.flush()
        await self.session.execute(
            update(PaymentLink)
            .where(PaymentLink.id == refund.link_id)
            .values(refund_count=PaymentLink.refund_count + 1)
            .execution_options(synchronize_session=False)
        )
        return refund

    async def add_refunded(self, link_id: int, cents: int) -> None:
        await self.session.execute(
            update(PaymentLink)
            .where(PaymentLink.id == link_id)
            .values(refunded_cents=PaymentLink.refunded_cents + cents)
            .execution_options(synchronize_session=False)
        )

    async def of_links(self, link_ids: Sequence[int]) -> dict[int, list[Refund]]:
        """The refunds of each link, oldest first."""
        found: dict[int, list[Refund]] = {link_id: [] for link_id in link_ids}
        for part in in_parts(list(link_ids)):
            rows = await self.all(
                select(Refund).where(Refund.link_id.in_(part)).order_by(Refund.id)
            )
            for refund in rows:
                found[refund.link_id].append(refund)
        return found

    async def claim_due(self, *, now: datetime, lease_until: datetime, limit: int) -> list[int]:
        """PENDING refunds due to be asked for (or about) again, leased until `lease_until` so
        that no other process takes them meanwhile; their ids."""
        due = await self.all(
            select(Refund)
            .where(Refund.status == PENDING, Refund.next_attempt_at <= now)
            .order_by(Refund.next_attempt_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        for refund in due:
            refund.next_attempt_at = lease_until
        await self.session.flush()
        return [refund.id for refund in due]
