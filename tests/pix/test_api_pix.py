"""The `api-pix` provider against a fake PSP speaking the Banco Central's API Pix over mutual TLS:
a link gets one charge, its page the PSP's code, and is paid once, by the PSP's webhook or by
the reconciliation; its charge is withdrawn when the link closes; a PSP that is down, answers
500 or hangs delays the charge and never the link (decisions.md, "Pix through a PSP's API Pix")."""

from __future__ import annotations

import html
from datetime import timedelta
from pathlib import Path

import httpx

from tests.support.api_pix import PIX_KEY, api_pix
from tests.support.payer import Payer
from tests.support.payment_links import BASE, tx
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.pix import charges


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


async def test_a_psp_that_glues_pix_to_the_whole_url_still_pays(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path, webhook_append="literal") as setup:
        link, charge = await setup.charged_link()
        await setup.psp.pay(charge.txid)  # to .../webhook?hmac=<secret>/pix
        assert setup.psp.notifications[-1].status == 200
        assert await setup.status_of(link) == "PAID"
