"""Pix refunds through the merchant's PSP (`api-pix`): a devolution per refund, with Tucano's own
id, natureza ORIGINAL; its end by the PSP's webhook or by asking again; a PSP that is down delays
the refund and never loses or doubles it (decisions.md, "Refunds, cancellation and the link's
lifecycle")."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.api_pix import Setup, api_pix
from tests.support.deliveries import eventually
from tests.support.payment_links import BASE, tx
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.pix import charges
from tucano.refunds.service import run_due_refunds


async def paid_by_pix(setup: Setup, amount: str = "10.00") -> tuple[dict[str, Any], str]:
    """A link paid through its charge at the PSP, and the Pix's end-to-end id."""
    link, charge = await setup.charged_link()
    paid = await setup.psp.pay(charge.txid, amount)
    assert await setup.status_of(link) == "PAID"
    return link, str(paid["endToEndId"])


async def refund(setup: Setup, link: dict[str, Any], **body: Any) -> dict[str, Any]:
    answer = await setup.merchant.post(
        f"{BASE}/{link['linkPaymentUuid']}/refunds",
        json=body,
        headers={"x-transaction-id": str(uuid.uuid4())},
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def refunds_of(setup: Setup, link: dict[str, Any]) -> list[dict[str, Any]]:
    answer = await setup.merchant.get(f"{BASE}/{link['linkPaymentUuid']}/refunds", headers=tx())
    return list(answer.json())


async def test_a_pix_payment_refunded_in_two_parts_through_the_psp(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path, refund_settle_seconds=None) as setup:
        link, e2e = await paid_by_pix(setup)
        first = await refund(setup, link, amount=4, reason="Item em falta")
        assert first["status"] == "PENDING"
        refund_id = uuid.UUID(first["refundId"]).hex
        [call] = setup.psp.calls_to("PUT", f"/pix/{e2e}/devolucao/{refund_id}")
        assert call.body["valor"] == "4.00" and call.body["natureza"] == "ORIGINAL"
        assert call.body["descricao"] == "Item em falta"
        # The PSP settles it and says so to the webhook: the refund ends, the link stays PAID.
        settled = await setup.psp.settle_refund(e2e, refund_id)
        [ended] = await refunds_of(setup, link)
        assert ended["status"] == "SUCCEEDED" and ended["completedAt"] is not None
        assert await setup.status_of(link) == "PAID"
        second = await refund(setup, link)  # the rest: 6.00
        assert second["amount"] == 6.0
        await setup.psp.settle_refund(e2e, uuid.UUID(second["refundId"]).hex)
        assert await setup.status_of(link) == "REFUNDED"
        shown = await setup.merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
        assert shown.json()["refundedAmount"] == 10.0
        assert settled["rtrId"].startswith("D")


async def test_a_refund_the_psp_does_not_make_fails_with_its_reason(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path, refund_settle_seconds=None) as setup:
        link, e2e = await paid_by_pix(setup)
        asked = await refund(setup, link)
        await setup.psp.settle_refund(
            e2e, uuid.UUID(asked["refundId"]).hex, status="NAO_REALIZADO", motivo="Conta encerrada"
        )
        [failed] = await refunds_of(setup, link)
        assert failed["status"] == "FAILED" and "Conta encerrada" in failed["failureReason"]
        assert await setup.status_of(link) == "PAID"


async def test_a_lost_webhook_is_made_up_for_by_asking_again(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path, refund_settle_seconds=None) as setup:
        link, e2e = await paid_by_pix(setup)
        asked = await refund(setup, link, amount=2.5)
        psp_id = uuid.UUID(asked["refundId"]).hex
        await setup.psp.settle_refund(e2e, psp_id, notify=False)
        assert (await refunds_of(setup, link))[0]["status"] == "PENDING"
        refunder = setup.service.app.state.refunder
        with clock.freeze(clock.now() + timedelta(minutes=5)):
            assert await run_due_refunds(setup.database, refunder) == 1
        assert (await refunds_of(setup, link))[0]["status"] == "SUCCEEDED"
        # Asked again with the same id and body: the PSP made one devolution.
        assert len(setup.psp.pix[e2e].refunds) == 1


async def test_a_psp_that_is_down_delays_the_refund_and_never_doubles_it(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link, e2e = await paid_by_pix(setup)
        setup.psp.fail_with(503, route="/pix/")
        asked = await refund(setup, link)
        assert asked["status"] == "PENDING"
        assert not setup.psp.pix[e2e].refunds
        setup.psp.clear_failures()
        refunder = setup.service.app.state.refunder
        with clock.freeze(clock.now() + timedelta(minutes=15)):
            await run_due_refunds(setup.database, refunder)
        assert len(setup.psp.pix[e2e].refunds) == 1

        async def settled() -> bool:  # by the PSP's webhook, 0.1 s later
            return (await refunds_of(setup, link))[0]["status"] == "SUCCEEDED"

        await eventually(settled, timeout=10, what="the refund's webhook")
        assert await setup.status_of(link) == "REFUNDED"


async def test_cancel_withdraws_the_links_charge_at_the_psp(
    private_database: Database, tmp_path: Path
) -> None:
    async with api_pix(private_database, tmp_path) as setup:
        link, charge = await setup.charged_link()
        answer = await setup.merchant.post(f"{BASE}/{link['linkPaymentUuid']}/cancel", headers=tx())
        assert answer.status_code == 200
        await charges.withdraw_closed_charges(setup.database, setup.charges, clock.now())
        [patch] = setup.psp.calls_to("PATCH", f"/cob/{charge.txid}")
        assert patch.body == {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}
        assert setup.psp.charges[charge.txid].status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
