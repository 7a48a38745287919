"""The `api-pix` provider against a fake PSP speaking the Banco Central's API Pix over mutual TLS:
a link gets one charge, its page the PSP's code, and is paid once, by the PSP's webhook or by
the reconciliation; its charge is withdrawn when the link closes; a PSP that is down, answers
500 or hangs delays the charge and never the link (decisions.md, "Pix through a PSP's API Pix")."""

from __future__ import annotations

import html
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from tests.support.fake_psp import FakePsp, fake_psp
from tests.support.payer import Payer
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
async def api_pix(private_database: Database, tmp_path: Path) -> AsyncIterator[Setup]:
    async with fake_psp(tmp_path) as psp:
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


async def test_a_link_gets_one_charge_and_its_page_the_psps_code(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link = await setup.link(description="Pedido 42")
        payer = Payer(setup.service, link)
        # Before the PSP has its charge, the page says Pix is on its way (and offers card).
        waiting = await payer.page()
        assert "data-pix-pending" in waiting and "data-card-form" in waiting
        await setup.make_charges()
        charge = await setup.charge_of(link)
        assert charge is not None and charge.status == "ACTIVE"
        [call] = setup.psp.calls_to("PUT", f"/cob/{charge.txid}")
        assert call.client_certificate is not None  # mutual TLS
        body = call.body
        assert body["valor"] == {"original": "10.00"}
        assert body["chave"] == PIX_KEY
        assert body["devedor"] == {"cpf": "52998224725", "nome": "Maria da Silva"}
        assert body["solicitacaoPagador"] == "Pedido 42"
        assert 4 * 86400 < body["calendario"]["expiracao"] <= 5 * 86400
        page = html.unescape(await payer.page())
        assert setup.psp.charges[charge.txid].pix_copia_e_cola in page
        assert "data-simulate" not in page
        # Run again: no second charge for the same link.
        await setup.make_charges()
        assert len(setup.psp.calls_to("PUT", f"/cob/{charge.txid}")) == 1
        await payer.close()


async def test_the_psps_webhook_pays_the_link_once(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link, charge = await setup.charged_link()
        paid = await setup.psp.pay(charge.txid)
        assert await setup.status_of(link) == "PAID"
        details = await setup.merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
        assert details.json()["payment"]["paymentReceipt"] == paid["endToEndId"]
        # The PSP retries its webhook: nothing is paid twice.
        again = await setup.psp.post_webhook({"pix": [paid]}, chave=PIX_KEY)
        assert again.status == 200
        assert await setup.status_of(link) == "PAID"


async def test_a_wrong_hmac_or_a_wrong_amount_pays_nothing(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link, charge = await setup.charged_link()
        item = {"endToEndId": "E12345678202612071200abcdefghijk", "txid": charge.txid}
        async with httpx.AsyncClient(base_url=setup.service.base_url) as http:
            forged = await http.post(
                "/pix-provider/v1/webhook/pix?hmac=guessed-secret-123456",
                json={"pix": [{**item, "valor": "10.00", "horario": "2026-12-07T12:00:00Z"}]},
            )
        assert forged.status_code == 401
        await setup.psp.pay(charge.txid, amount="9.99")
        assert await setup.status_of(link) == "CREATED"


async def test_reconciliation_pays_a_link_whose_webhook_never_came(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link, charge = await setup.charged_link()
        await setup.psp.pay(charge.txid, notify=False)
        assert await setup.status_of(link) == "CREATED"
        await charges.reconcile_charges(setup.database, setup.charges, clock.now(), limit=1000)
        assert await setup.status_of(link) == "PAID"


async def test_a_psp_down_500_or_hanging_delays_the_charge_and_never_the_link(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        await setup.psp.down()
        link = await setup.link()  # created at once, PSP or not
        await setup.make_charges()
        charge = await setup.charge_of(link)
        assert charge is not None and charge.status == "PENDING" and charge.attempts == 1
        assert "data-pix-pending" in await Payer(setup.service, link).page()
        await setup.psp.up()
        setup.psp.fail_with(500, route="/cob")
        with clock.freeze(clock.now() + timedelta(seconds=30)):
            await setup.make_charges()
        charge = await setup.charge_of(link)
        assert charge is not None and charge.status == "PENDING" and charge.attempts == 2
        setup.psp.clear_failures()
        with clock.freeze(clock.now() + timedelta(minutes=5)):
            await setup.make_charges()
        charge = await setup.charge_of(link)
        assert charge is not None and charge.status == "ACTIVE"


async def test_the_charge_is_withdrawn_when_its_link_expires(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link, charge = await setup.charged_link(expirationDays=1)
        with clock.freeze(clock.now() + timedelta(days=2)):
            await charges.withdraw_closed_charges(setup.database, setup.charges, clock.now())
        assert setup.psp.charges[charge.txid].status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
        withdrawn = await setup.charge_of(link)
        assert withdrawn is not None and withdrawn.status == "WITHDRAWN"
