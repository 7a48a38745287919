"""A Tucano on the `api-pix` Pix provider, pointed at a fake PSP, with a merchant whose key the
PSP's webhook is registered for: what the api-pix tests share."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tests.support.fake_psp import FakePsp, fake_psp
from tests.support.payment_links import BASE, create, tx
from tests.support.service import Merchant, RunningService, serving
from tests.support.settings import make_settings
from tucano.core.clock import clock
from tucano.customers import service as customers
from tucano.customers.schemas import MerchantProfileInput
from tucano.db.database import Database
from tucano.payment_links.models import PaymentLink
from tucano.pix import charges
from tucano.pix.api_pix_client import ApiPixClient
from tucano.pix.models import PixCharge
from tucano.pix.psp import ApiPixCharges

WEBHOOK_SECRET = "webhook-secret-0123456789"
PIX_KEY = "3f2a9c1e-7b4d-4e8f-9a6b-1c2d3e4f5a6b"


@dataclass
class Setup:
    psp: FakePsp
    service: RunningService
    charges: ApiPixCharges
    merchant: Merchant

    @property
    def database(self) -> Database:
        return self.service.database

    async def link(self, **overrides: Any) -> dict[str, Any]:
        return await create(self.merchant, amount=Decimal("10.00"), **overrides)

    async def charge_of(self, link: dict[str, Any]) -> PixCharge | None:
        async with self.database.read_session() as session:
            return await session.scalar(
                select(PixCharge)
                .join(PaymentLink, PaymentLink.id == PixCharge.link_id)
                .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
            )

    async def charged_link(self, **overrides: Any) -> tuple[dict[str, Any], PixCharge]:
        """A new link and its charge, made at the PSP."""
        link = await self.link(**overrides)
        await self.make_charges()
        charge = await self.charge_of(link)
        assert charge is not None and charge.status == "ACTIVE"
        return link, charge

    async def make_charges(self) -> None:
        await charges.add_missing_charges(self.database, clock.now())
        await charges.create_due_charges(self.database, self.charges, clock.now())

    async def status_of(self, link: dict[str, Any]) -> str:
        answer = await self.merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
        return str(answer.json()["status"]["description"])


@asynccontextmanager
async def api_pix(
    private_database: Database, tmp_path: Path, **psp_options: Any
) -> AsyncIterator[Setup]:
    async with fake_psp(tmp_path, **psp_options) as psp:
        pix = {k.removeprefix("TUCANO_").lower(): v for k, v in psp.tucano_env().items()}
        settings = make_settings(private_database.url, **pix, pix_webhook_secret=WEBHOOK_SECRET)
        async with serving(settings, private_database) as service:
            merchant = await service.merchant()
            async with service.database.session() as session:
                await customers.set_profile(
                    session,
                    customer_id=merchant.customer_id,
                    profile=MerchantProfileInput(
                        merchant_name="Loja Tucano", merchant_city="Sao Paulo", pix_key=PIX_KEY
                    ),
                    now=clock.now(),
                )
                await session.commit()
            psp.register_webhook(
                PIX_KEY, f"{service.base_url}/pix-provider/v1/webhook?hmac={WEBHOOK_SECRET}"
            )
            client = ApiPixClient.from_settings(settings)
            try:
                yield Setup(psp, service, ApiPixCharges(client), merchant)
            finally:
                await client.close()
