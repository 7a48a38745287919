"""Every statement on API clients and the instance's own secrets."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from tucano.auth.models import ApiClient, InstanceSecret
from tucano.db.repository import Repository


class ApiClientRepository(Repository[ApiClient]):
    model = ApiClient

    async def add(self, client: ApiClient) -> ApiClient:
        self.session.add(client)
        await self.session.flush()
        return client

    async def by_client_id(self, client_id: str, *, for_update: bool = False) -> ApiClient | None:
        statement = select(ApiClient).where(ApiClient.client_id == client_id)
        if for_update:
            statement = statement.with_for_update()
        return await self.get_one_or_none(statement)

    async def every(self, *, customer_id: int | None = None) -> Sequence[ApiClient]:
        """Every API client (of one customer, if given), oldest first."""
        statement = select(ApiClient).order_by(ApiClient.id)
        if customer_id is not None:
            statement = statement.where(ApiClient.customer_id == customer_id)
        return await self.all(statement)

    async def revoked_client_ids(self) -> Sequence[str]:
        return await self.all(select(ApiClient.client_id).where(ApiClient.revoked_at.is_not(None)))

    async def instance_secret(self, name: str) -> InstanceSecret | None:
        return await self.session.get(InstanceSecret, name)

    async def add_instance_secret(self, secret: InstanceSecret) -> None:
        self.session.add(secret)
