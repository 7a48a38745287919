"""Every statement on merchant profiles."""

from __future__ import annotations

from tucano.customers.models import MerchantProfile
from tucano.db.repository import Repository


class MerchantProfileRepository(Repository[MerchantProfile]):
    model = MerchantProfile

    async def get(self, customer_id: int, *, for_update: bool = False) -> MerchantProfile | None:
        return await self.session.get(MerchantProfile, customer_id, with_for_update=for_update)

    async def add(self, profile: MerchantProfile) -> MerchantProfile:
        self.session.add(profile)
        await self.session.flush()
        return profile
