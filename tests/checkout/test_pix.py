"""PIX on the checkout, over HTTP on each database: the BR Code and its QR, the sandbox's
simulated payment, and the production path, where a PIX_QR_INBOUND the PIX system publishes
pays the link whose txid and amount it carries (and nothing else does)."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import segno
from sqlalchemy import select

from tests.support.payer import BROWSER, Payer, checkout_path
from tests.support.payment_links import BASE, create, tx
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.brazil.brcode import has_valid_crc, parse_tlv
from tucano.brazil.pix import SANDBOX_ISPB, new_end_to_end_id
from tucano.brazil.pix_keys import sandbox_pix_key
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.customers.schemas import MerchantProfileInput
from tucano.customers.service import set_profile
from tucano.deliveries.models import Event


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


async def publisher_headers(service: RunningService) -> dict[str, str]:
    token = await service.token(customer_id=1, scopes=[Scope.EVENTS_PUBLISH])
    return {"Authorization": f"Bearer {token}", "content-type": "application/json"}


@pytest.fixture
async def publisher(service: RunningService) -> dict[str, str]:
    return await publisher_headers(service)


@pytest.fixture
async def payers(service: RunningService) -> AsyncIterator[list[Payer]]:
    made: list[Payer] = []
    yield made
    for payer in made:
        await payer.close()


def pix_code_of(page: str) -> str:
    match = re.search(r"<code[^>]*data-pix-code[^>]*>([^<]+)</code>", page)
    assert match is not None, "no PIX code on the page"
    return html.unescape(match.group(1))


def fields_of(code: str) -> dict[str, str]:
    return dict(parse_tlv(code))


def txid_of(code: str) -> str:
    return dict(parse_tlv(fields_of(code)["62"]))["05"]


async def open_page(service: RunningService, link: dict[str, Any], **headers: str) -> str:
    answer = await service.http.get(checkout_path(link), headers={**BROWSER, **headers})
    assert answer.status_code == 200, answer.text
    return answer.text


async def details(merchant: Merchant, link: dict[str, Any]) -> dict[str, Any]:
    answer = await merchant.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx())
    assert answer.status_code == 200
    return dict(answer.json())


async def test_the_page_shows_the_br_code_of_the_link_as_text_and_as_its_qr(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, amount=Decimal("1234.50"))
    page = await open_page(service, link)
    code = pix_code_of(page)
    assert has_valid_crc(code)
    fields = fields_of(code)
    assert list(fields) == ["00", "01", "26", "52", "53", "54", "58", "59", "60", "62", "63"]
    assert (fields["00"], fields["01"], fields["52"], fields["53"]) == ("01", "12", "0000", "986")
    assert (fields["54"], fields["58"]) == ("1234.50", "BR")
    assert (fields["59"], fields["60"]) == ("TUCANO SANDBOX", "SAO PAULO")
    account = dict(parse_tlv(fields["26"]))
    assert account == {"00": "br.gov.bcb.pix", "01": sandbox_pix_key(merchant.customer_id)}
    assert re.fullmatch(r"[A-Za-z0-9]{1,25}", txid_of(code))
    assert "Copiar código PIX" in page
    # The QR is segno's of exactly that text, inline (the browser tests decode it from pixels).
    svg = re.search(r"<svg[^>]*class=\"qr-code\".*?</svg>", page, re.S)
    assert svg is not None
    expected = segno.make(code, error="m", micro=False)
    assert f'viewBox="0 0 {expected.symbol_size(scale=1, border=4)[0]}' in svg.group(0)
    # Each link has a txid of its own.
    other = pix_code_of(await open_page(service, await create(merchant, amount=Decimal("1234.50"))))
    assert txid_of(other) != txid_of(code)


async def test_the_br_code_carries_the_merchant_profile(
    service: RunningService, merchant: Merchant
) -> None:
    async with service.database.session() as session:
        await set_profile(
            session,
            customer_id=merchant.customer_id,
            profile=MerchantProfileInput(
                merchant_name="Padaria Pão de Açúcar do João Ltda",
                merchant_city="São José dos Campos",
                pix_key="padaria@exemplo.com.br",
                mcc="5462",
            ),
            now=clock.now(),
        )
        await session.commit()
    link = await create(merchant, amount=Decimal("9.90"))
    page = await open_page(service, link)
    fields = fields_of(pix_code_of(page))
    assert fields["59"] == "Padaria Pao de Acucar do"  # accents gone, 25 at most
    assert fields["60"] == "Sao Jose dos Ca"
    assert fields["52"] == "5462" and fields["54"] == "9.90"
    assert dict(parse_tlv(fields["26"]))["01"] == "padaria@exemplo.com.br"
    assert "Cobrança de Padaria Pão de Açúcar do João Ltda" in html.unescape(page)


async def test_the_sandbox_simulation_pays_by_pix_through_the_pix_qr_inbound_path(
    service: RunningService, merchant: Merchant, payers: list[Payer]
) -> None:
    link = await create(merchant, amount=Decimal("77.70"), userReference="pedido-9")
    payer = Payer(service, link)
    payers.append(payer)
    status = f"{checkout_path(link).replace('?', '/status?')}"
    assert (await payer.http.get(status)).json() == {"status": "CREATED"}
    code = pix_code_of(await payer.page())
    answer = await payer.simulate_pix()
    assert answer.status_code == 303 and answer.headers["location"] == checkout_path(link)
    assert (await payer.http.get(status)).json() == {"status": "PAID"}
    receipt = await payer.page()
    assert "Pagamento aprovado" in receipt and "data-pix-code" not in receipt
    payment = (await details(merchant, link))["payment"]
    assert payment["paymentMethod"] == 2 and payment["paymentReceipt"] in receipt
    events = {
        event.event_type: json.loads(event.payload) for event in await events_of(service, merchant)
    }
    assert set(events) == {"PIX_QR_INBOUND", "PAYMENT_LINK_INBOUND"}
    pix, paid = events["PIX_QR_INBOUND"], events["PAYMENT_LINK_INBOUND"]
    assert pix["txid"] == txid_of(code) and pix["amount"] == 77.7 and pix["type"] == "PAYMENT"
    assert pix["endToEndId"] == payment["paymentReceipt"] == paid["paymentReceipt"]
    assert paid["paymentMethod"] == "PIX" and paid["userReference"] == "pedido-9"


async def events_of(service: RunningService, merchant: Merchant) -> list[Event]:
    async with service.database.session() as session:
        return list(
            await session.scalars(select(Event).where(Event.customer_id == merchant.customer_id))
        )


def pix_event(customer_id: int, txid: str, amount: str, **payload: Any) -> dict[str, Any]:
    return {
        "eventType": "PIX_QR_INBOUND",
        "customerId": customer_id,
        "payload": {
            "txid": txid,
            "amount": amount,
            "payer": {"documentNumber": "52998224725", "name": "Maria da Silva"},
            "endToEndId": new_end_to_end_id(ispb=SANDBOX_ISPB, at=clock.now()),
            "type": "PAYMENT",
            "status": "CONFIRMED",
            "paymentDate": "2026-12-01T10:00:00.000Z",
        }
        | payload,
    }


async def publish(
    service: RunningService, headers: dict[str, str], body: dict[str, Any], **extra: str
) -> None:
    answer = await service.http.post(
        "/internal/v1/events", content=json.dumps(body), headers={**headers, **extra}
    )
    assert answer.status_code == 202, answer.text


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_published_pix_payment_of_the_txid_and_amount_pays_the_link(
    service: RunningService, merchant: Merchant, publisher: dict[str, str], idempotent: bool
) -> None:
    link = await create(merchant, amount=Decimal("150.00"))
    txid = txid_of(pix_code_of(await open_page(service, link)))
    event = pix_event(merchant.customer_id, txid, "150.00")
    extra = {"Idempotency-Key": str(uuid.uuid4())} if idempotent else {}
    await publish(service, publisher, event, **extra)
    paid = await details(merchant, link)
    assert paid["status"]["description"] == "PAID"
    assert paid["payment"]["paymentMethod"] == 2
    assert paid["payment"]["paymentReceipt"] == event["payload"]["endToEndId"]
    announced = [
        json.loads(event.payload)
        for event in await events_of(service, merchant)
        if event.event_type == "PAYMENT_LINK_INBOUND"
    ]
    assert [body["paymentReceipt"] for body in announced] == [event["payload"]["endToEndId"]]
    # The same payment reported again (a retry) pays nothing more.
    await publish(service, publisher, event, **extra)
    assert (await details(merchant, link))["payment"] == paid["payment"]


@pytest.mark.parametrize(
    "mismatch", ["amount", "txid", "another customer", "refund", "case of the txid"]
)
async def test_a_pix_payment_that_does_not_match_pays_nothing(
    service: RunningService,
    merchant: Merchant,
    publisher: dict[str, str],
    mismatch: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    link = await create(merchant, amount=Decimal("150.00"))
    txid = txid_of(pix_code_of(await open_page(service, link)))
    customer, amount, extra = merchant.customer_id, "150.00", {}
    if mismatch == "amount":
        amount = "149.99"
    elif mismatch == "txid":
        txid = txid[:-1] + ("A" if txid[-1] != "A" else "B")
    elif mismatch == "another customer":
        customer += 1
    elif mismatch == "refund":
        extra = {
            "type": "REFUND",
            "devolutionEndToEndId": new_end_to_end_id(ispb=SANDBOX_ISPB, at=clock.now()),
        }
    else:
        txid = txid.swapcase()
    await publish(service, publisher, pix_event(customer, txid, amount, **extra))
    assert (await details(merchant, link))["status"]["description"] == "CREATED"
    if mismatch == "amount":
        assert "pix_payment_amount_differs" in capfd.readouterr().out


async def test_a_pix_payment_of_an_expired_link_pays_nothing(service: RunningService) -> None:
    with clock.freeze(datetime(2031, 6, 1, 12, 0, tzinfo=UTC)) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, amount=Decimal("10.00"), expirationDays=1)
        txid = txid_of(pix_code_of(await open_page(service, link)))
        frozen.advance(timedelta(days=1))
        publisher = await publisher_headers(service)
        await publish(service, publisher, pix_event(merchant.customer_id, txid, "10.00"))
        merchant = await service.merchant(customer_id=merchant.customer_id)  # a fresh token
        assert (await details(merchant, link))["status"]["description"] == "EXPIRED"


async def test_production_offers_pix_only_with_the_merchants_key_and_never_simulates(
    production_service: RunningService,
) -> None:
    merchant = await production_service.merchant()
    link = await create(merchant)
    page = await open_page(production_service, link)
    assert "data-pix" not in page and "TUCANO SANDBOX" not in page
    assert "Nenhuma forma de pagamento" in page  # no key, no card processor
    async with production_service.database.session() as session:
        await set_profile(
            session,
            customer_id=merchant.customer_id,
            profile=MerchantProfileInput(
                merchant_name="Loja Real", merchant_city="Recife", pix_key="11.222.333/0001-81"
            ),
            now=clock.now(),
        )
        await session.commit()
    page = await open_page(production_service, link)
    assert "data-pix" in page and "Simular pagamento PIX" not in page
    assert dict(parse_tlv(fields_of(pix_code_of(page))["26"]))["01"] == "11222333000181"
    payer = Payer(production_service, link)
    try:
        await payer.page()
        simulate = await payer.http.post(
            checkout_path(link).replace("?", "/pix/simulate?"),
            data={"csrf_token": "none: the page has no such form"},
            headers={"accept": "application/json"},
        )
        assert_error_body(simulate, 403, ErrorCode.SANDBOX_ONLY)
    finally:
        await payer.close()


@pytest.mark.parametrize("status", ["REJECTED", "pending", "CANCELADA", "NAO_REALIZADO"])
async def test_a_pix_payment_whose_status_says_it_failed_pays_nothing(
    service: RunningService,
    merchant: Merchant,
    publisher: dict[str, str],
    status: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    link = await create(merchant, amount=Decimal("150.00"))
    txid = txid_of(pix_code_of(await open_page(service, link)))
    await publish(
        service, publisher, pix_event(merchant.customer_id, txid, "150.00", status=status)
    )
    assert (await details(merchant, link))["status"]["description"] == "CREATED"
    assert "pix_payment_not_settled" in capfd.readouterr().out
    # The same payment, settled, pays it (CONCLUIDA: the Banco Central API's word).
    await publish(
        service, publisher, pix_event(merchant.customer_id, txid, "150.00", status="CONCLUIDA")
    )
    assert (await details(merchant, link))["status"]["description"] == "PAID"


async def test_the_status_of_an_altered_token_is_the_404_of_the_page(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant)
    status = checkout_path(link).replace("?", "/status?")[:-2] + "xx"
    assert_error_body(await service.http.get(status), 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)


async def test_a_batch_pays_the_links_its_pix_payments_match_and_each_only_once(
    service: RunningService, merchant: Merchant, publisher: dict[str, str]
) -> None:
    first = await create(merchant, amount=Decimal("10.00"))
    second = await create(merchant, amount=Decimal("20.00"))
    txids = [txid_of(pix_code_of(await open_page(service, link))) for link in (first, second)]
    payments = [
        pix_event(merchant.customer_id, txids[0], "10.00"),
        pix_event(merchant.customer_id, txids[1], "20.00"),
        pix_event(merchant.customer_id, txids[0], "10.00"),  # the first link, reported again
    ]
    answer = await service.http.post(
        "/internal/v1/events/batch",
        content=json.dumps({"events": payments}),
        headers=publisher,
    )
    assert answer.status_code == 202, answer.text
    assert [e["eventType"] for e in answer.json()["events"]] == ["PIX_QR_INBOUND"] * 3
    for link, payment in ((first, payments[0]), (second, payments[1])):
        paid = await details(merchant, link)
        assert paid["status"]["description"] == "PAID"
        assert paid["payment"]["paymentReceipt"] == payment["payload"]["endToEndId"]
    announced = [
        json.loads(event.payload)["paymentReceipt"]
        for event in await events_of(service, merchant)
        if event.event_type == "PAYMENT_LINK_INBOUND"
    ]
    assert sorted(announced) == sorted(p["payload"]["endToEndId"] for p in payments[:2])
