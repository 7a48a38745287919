"""Every statement on payment links' charges at the PSP (the `api-pix` provider)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update

from tucano.db.repository import Repository
from tucano.payment_links.models import PaymentLink
from tucano.pix.models import ACTIVE, PixCharge


class PixChargeRepository(Repository[PixCharge]):
    model = PixCharge

    async def for_link(self, link_id: int) -> PixCharge | None:
        return await self.get_one_or_none(select(PixCharge).where(PixCharge.link_id == link_id))

    async def by_txid(self, txid: str) -> PixCharge | None:
        return await self.get_one_or_none(select(PixCharge).where(PixCharge.txid == txid))

    async def open_links_without_charge(self, now: datetime, limit: int) -> Sequence[PaymentLink]:
        """Links that can still be paid and have no charge yet, oldest first."""
        return await self.all(
            select(PaymentLink)
            .outerjoin(PixCharge, PixCharge.link_id == PaymentLink.id)
            .where(
                PixCharge.id.is_(None),
                PaymentLink.status == "CREATED",
                PaymentLink.expires_at > now,
            )
            .order_by(PaymentLink.id)
            .limit(limit)
        )

    async def add(self, charge: PixCharge) -> PixCharge:
        self.session.add(charge)
        await self.session.flush()
        return charge

    async def claim_due(
        self, status: str, now: datetime, *, lease_until: datetime, limit: int
    ) -> Sequence[PixCharge]:
        """Up to `limit` charges in `status` whose next attempt is due, each held until
        `lease_until` (another process skips them meanwhile)."""
        due = (
            select(PixCharge.id)
            .where(PixCharge.status == status, PixCharge.next_attempt_at <= now)
            .order_by(PixCharge.next_attempt_at)
            .limit(limit)
        )
        if self.on_postgresql:
            due = due.with_for_update(skip_locked=True)
        ids = list(await self.session.scalars(due))
        if not ids:
            return []
        await self.session.execute(
            update(PixCharge)
            .where(PixCharge.id.in_(ids), PixCharge.status == status)
            .values(next_attempt_at=lease_until)
        )
        return await self.all(
            select(PixCharge)
            .where(PixCharge.id.in_(ids))
            .order_by(PixCharge.id)
            .execution_options(populate_existing=True)
        )

    async def active_of_closed_links(self, now: datetime, limit: int) -> Sequence[PixCharge]:
        """Charges still payable at the PSP whose link can no longer be paid (it expired, or was
        paid another way): to be withdrawn."""
        return await self.all(
            select(PixCharge)
            .join(PaymentLink, PaymentLink.id == PixCharge.link_id)
            .where(
                PixCharge.status == ACTIVE,
                (PaymentLink.expires_at <= now) | (PaymentLink.status != "CREATED"),
            )
            .order_by(PixCharge.id)
            .limit(limit)
        )

    async def active_to_check(self, now: datetime, limit: int) -> Sequence[PixCharge]:
        """Charges of open links the PSP may have been paid for, least recently checked first,
        each marked as checked now."""
        charges = await self.all(
            select(PixCharge)
            .join(PaymentLink, PaymentLink.id == PixCharge.link_id)
            .where(PixCharge.status == ACTIVE, PaymentLink.status == "CREATED")
            .order_by(PixCharge.checked_at.is_not(None), PixCharge.checked_at, PixCharge.id)
            .limit(limit)
        )
        for charge in charges:
            charge.checked_at = now
        await self.session.flush()
        return charges
