"""The portal's payment links over HTTP, as a browser posts its forms: the list with the API's
filters, a link's page (fields, payment, refunds, checkout URL and its QR code), and creating,
cancelling and refunding through the forms, once per form however often it is sent; read-only
sessions see no action and are refused one; another customer's link is never found."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from decimal import Decimal
from html import unescape
from typing import Any

import httpx
import pytest

from tests.support.payment_links import BASE, cancel, create, listing, pay, refund, tx
from tests.support.portal import csrf_token, open_portal
from tests.support.service import Merchant, RunningService
from tucano.core.clock import clock
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX
from tucano.portal import payment_link_views
from tucano.refunds.service import run_due_refunds

LIST = "/portal/payment-links"
_KEY = re.compile(r'name="key" value="([^"]+)"')


def text_of(html: str) -> str:
    """The page's words, tags gone, spaces collapsed."""
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


def row_of(page: str, link_uuid: str) -> str:
    found = re.search(rf'<tr data-link="{link_uuid}">(.*?)</tr>', page, re.S)
    assert found, page
    return text_of(found.group(1))


def form_of(page: httpx.Response, **fields: str) -> dict[str, str]:
    """The page's forgery field and form key, with `fields`."""
    key = _KEY.search(page.text)
    assert key, page.text
    return {"csrf_token": csrf_token(page), "key": key.group(1), **fields}


def new_link(**fields: str) -> dict[str, str]:
    return {
        "payerName": "Joana Prado",
        "registrationNumber": "529.982.247-25",
        "amount": "1.234,56",
        "numbersInstallments": "3",
        "expirationDays": "5",
        "description": "Pedido 7",
        "userReference": "pedido-7",
        **fields,
    }


async def details(merchant: Merchant, link_uuid: str) -> dict[str, Any]:
    response = await merchant.get(f"{BASE}/{link_uuid}", headers=tx())
    assert response.status_code == 200, response.text
    return dict(json.loads(response.text, parse_float=Decimal))


async def amounts(merchant: Merchant) -> list[Decimal]:
    """The amounts of the merchant's links, newest first."""
    listed = await listing(merchant)
    return [Decimal(str(link["amount"])) for link in listed["content"]]


async def test_the_list_shows_the_customers_links_newest_first_with_their_state(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    other = await service.merchant()
    first = await create(merchant, payerName="Ana Primeira", amount=Decimal("10.00"))
    paid = await create(merchant, payerName="Bruno Pago", amount=Decimal("200.00"))
    await pay(service, merchant, paid["linkPaymentUuid"], METHOD_CARD, installments=2)
    await refund(merchant, paid["linkPaymentUuid"], amount=50)
    theirs = await create(other, payerName="Cliente Alheio")
    async with open_portal(merchant, language="en") as client:
        page = (await client.get(LIST)).text
        created = (await client.get(LIST, params={"status": "CREATED"})).text
        by_card = (await client.get(LIST, params={"paymentMethod": "1"})).text
        by_reference = (await client.get(LIST, params={"userReference": "nothing-like-it"})).text
    assert page.index(paid["linkPaymentUuid"]) < page.index(first["linkPaymentUuid"])
    assert row_of(page, first["linkPaymentUuid"]).startswith("Ana Primeira ")
    assert row_of(page, first["linkPaymentUuid"]).endswith("R$ 10.00 Created — order-42")
    assert row_of(page, paid["linkPaymentUuid"]).endswith(
        "R$ 200.00 Partially refunded Credit card in 2x order-42"
    )
    assert f'href="{LIST}/{paid["linkPaymentUuid"]}">Bruno Pago</a>' in page
    assert theirs["linkPaymentUuid"] not in page and "Cliente Alheio" not in page
    assert "2 links" in page
    assert first["linkPaymentUuid"] in created and paid["linkPaymentUuid"] not in created
    assert paid["linkPaymentUuid"] in by_card and first["linkPaymentUuid"] not in by_card
    assert "No payment link matches these filters." in by_reference
    assert 'href="/portal/payment-links/new">Create payment link</a>' in page


async def test_the_list_defaults_to_the_last_30_days_and_says_what_is_wrong_with_a_filter(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    link = await create(merchant)
    async with open_portal(merchant) as client:
        page = (await client.get(LIST)).text
        long_ago = await client.get(LIST, params={"from": "2001-01-01", "to": "2001-01-31"})
        wrong = await client.get(
            LIST,
            params={
                "from": "2026-13-01",
                "status": "PAGO",
                "paymentMethod": "3",
                "registrationNumber": "123_456",
            },
        )
        reversed_days = await client.get(LIST, params={"from": "2026-02-01", "to": "2026-01-01"})
    dates = re.findall(r'type="date" value="([0-9-]+)"', page)
    assert len(dates) == 2 and dates[0] < dates[1]
    assert link["linkPaymentUuid"] in page
    assert long_ago.status_code == 200 and link["linkPaymentUuid"] not in long_ago.text
    assert "Nenhum link de pagamento com estes filtros." in long_ago.text
    assert wrong.status_code == 400
    said = text_of(wrong.text)
    assert "Criados de Informe uma data como AAAA-MM-DD." in said
    assert said.count("Escolha uma das opções.") == 2
    assert "CPF ou CNPJ Use só números e letras, com pontos, traços ou barras." in said
    assert 'aria-invalid="true" aria-describedby' not in wrong.text  # described, then invalid
    assert 'aria-describedby="f-status-error" aria-invalid="true"' in wrong.text
    assert "<table" not in wrong.text
    assert reversed_days.status_code == 400
    assert "Deve ser no mesmo dia ou depois de “Criados de”." in reversed_days.text


async def test_many_links_are_listed_a_page_at_a_time_with_their_filters(
    service: RunningService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(payment_link_views, "LINKS_PER_PAGE", 2)
    merchant = await service.merchant()
    made = [await create(merchant, userReference=f"lote-{n}") for n in range(3)]
    async with open_portal(merchant) as client:
        first = (await client.get(LIST, params={"status": "CREATED"})).text
        second = (await client.get(LIST, params={"status": "CREATED", "page": "1"})).text
    assert made[2]["linkPaymentUuid"] in first and made[0]["linkPaymentUuid"] not in first
    assert made[0]["linkPaymentUuid"] in second
    assert "Página 1 de 2" in first
    found = re.search(r'href="(/portal/payment-links\?[^"]+)">Próxima página', first)
    assert found and "status=CREATED" in found.group(1) and "page=1" in found.group(1)


async def test_a_link_created_by_the_form_is_created_once_however_often_it_is_sent(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant) as client:
        blank = await client.get(f"{LIST}/new")
        assert blank.status_code == 200
        assert '<label for="new-payer">Nome do pagador</label>' in blank.text
        fields = form_of(blank, **new_link())
        sent = await client.post(LIST, data=fields)
        again = await client.post(LIST, data=fields)  # a double click, or a reload
        assert sent.status_code == again.status_code == 303
        assert sent.headers["location"] == again.headers["location"]
        location = sent.headers["location"]
        assert location.startswith(f"{LIST}/") and location.endswith("?done=created")
        page = await client.get(location)
    link_uuid = location.removeprefix(f"{LIST}/").split("?")[0]
    listed = await listing(merchant)
    assert [link["linkPaymentUuid"] for link in listed["content"]] == [link_uuid]
    shown = await details(merchant, link_uuid)
    assert shown["amount"] == Decimal("1234.56") and shown["numbersInstallments"] == 3
    assert shown["registrationNumber"] == "52998224725"
    assert shown["userReference"] == "pedido-7" and shown["description"] == "Pedido 7"
    said = text_of(page.text)
    assert 'role="status">Link de pagamento criado.' in page.text
    assert "Situação: Criado" in said
    assert (
        f'<code id="checkout-url">{shown["urlPayment"].replace("&", "&amp;")}</code>' in page.text
    )
    assert '<svg role="img" aria-label="QR code do endereço do checkout"' in page.text
    assert ">Copiar</button>" in page.text
    for fact in (
        f"ID do link {link_uuid}",
        "CPF ou CNPJ 52998224725",
        "Valor R$ 1.234,56",
        "até 3x (1x R$ 1.234,56 · 2x R$ 617,28 · 3x R$ 411,52)",
        "Descrição Pedido 7",
        f"Código de verificação {shown['verificationToken']}",
        "Ainda não foi pago.",
        "Nenhum reembolso.",
    ):
        assert fact in said, fact
    assert ">Cancelar link</button>" in page.text
    assert 'action="/portal/payment-links/' + link_uuid + '/refunds"' not in page.text


async def test_the_form_says_what_is_wrong_next_to_each_field_and_creates_nothing(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, language="en") as client:
        blank = await client.get(f"{LIST}/new")
        wrong = await client.post(
            LIST,
            data=form_of(
                blank,
                **new_link(
                    payerName="  ",
                    registrationNumber="529.982.247-26",
                    amount="0.001",
                    numbersInstallments="11",
                    expirationDays="two",
                    description="card 4111 1111 1111 1111",
                ),
            ),
        )
        corrected = await client.post(
            LIST, data=form_of(wrong, **new_link(amount="99.90", description=""))
        )
    assert wrong.status_code == 400
    said = text_of(wrong.text)
    assert "Nothing was created. Check the fields marked." in said
    assert "Payer's name Fill in this field." in said
    assert "Payer's CPF or CNPJ Is not a valid CPF: check digits do not match." in said
    assert "Amount (R$) For example 150.00. Must be at least 0.01." in said
    assert "Card instalments (up to) 1 to 10. Must be at most 10." in said
    assert "Valid for (days) 1 to 10. Enter a whole number." in said
    assert "Has a card number" in said and "4111" not in wrong.text
    assert 'value="529.982.247-26"' in wrong.text  # what was typed stays
    assert 'aria-describedby="new-payer-error" aria-invalid="true"' in wrong.text
    assert corrected.status_code == 303
    assert await amounts(merchant) == [Decimal("99.90")]


async def test_a_form_sent_again_with_other_values_asks_to_send_it_once_more(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, language="en") as client:
        blank = await client.get(f"{LIST}/new")
        fields = form_of(blank, **new_link())
        assert (await client.post(LIST, data=fields)).status_code == 303
        changed = await client.post(LIST, data={**fields, "amount": "20.00"})
        assert changed.status_code == 409
        assert "This form was already sent with other values." in changed.text
        assert fields["key"] not in changed.text  # a new key: sent again, it makes a new link
        made = await client.post(LIST, data=form_of(changed, **new_link(amount="20.00")))
    assert made.status_code == 303
    assert await amounts(merchant) == [Decimal("20.00"), Decimal("1234.56")]


async def test_a_created_link_is_cancelled_from_its_page_once(service: RunningService) -> None:
    merchant = await service.merchant()
    link = await create(merchant)
    link_uuid = link["linkPaymentUuid"]
    async with open_portal(merchant, language="en") as client:
        page = await client.get(f"{LIST}/{link_uuid}")
        assert 'data-confirm="Cancel the link for Maria da Silva? This cannot be undone."' in (
            page.text
        )
        cancelled = await client.post(
            f"{LIST}/{link_uuid}/cancel", data={"csrf_token": csrf_token(page)}
        )
        assert cancelled.status_code == 303
        assert cancelled.headers["location"] == f"{LIST}/{link_uuid}?done=cancelled"
        shown = (await client.get(cancelled.headers["location"])).text
        again = await client.post(
            f"{LIST}/{link_uuid}/cancel", data={"csrf_token": csrf_token(page)}
        )
    assert (await details(merchant, link_uuid))["status"]["description"] == "CANCELLED"
    assert 'role="status">Link cancelled: the checkout takes no more payments.' in shown
    assert "Status: Cancelled" in text_of(shown) and ">Cancel link</button>" not in shown
    assert again.status_code == 409
    assert "Only a link that is still created (not paid nor expired) can be cancelled: this " in (
        text_of(again.text)
    )
    assert "this one is cancelled." in text_of(again.text)


async def test_a_paid_link_is_refunded_in_part_once_per_form_then_the_rest(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    link = await create(merchant, amount=Decimal("100.00"))
    link_uuid = link["linkPaymentUuid"]
    await pay(service, merchant, link_uuid, METHOD_CARD)
    async with open_portal(merchant) as client:
        page = await client.get(f"{LIST}/{link_uuid}")
        assert 'name="amount" type="text" value="100,00"' in page.text  # what is left
        assert "R$ 100,00 ainda podem ser devolvidos" in page.text
        assert ">Cancelar link</button>" not in page.text
        fields = form_of(page, amount="40,00", reason="Item em falta")
        sent = await client.post(f"{LIST}/{link_uuid}/refunds", data=fields)
        again = await client.post(f"{LIST}/{link_uuid}/refunds", data=fields)
        assert sent.status_code == again.status_code == 303
        assert sent.headers["location"] == again.headers["location"]
        shown = await client.get(sent.headers["location"])
        too_much = await client.post(
            f"{LIST}/{link_uuid}/refunds", data=form_of(shown, amount="60,01")
        )
        rest = await client.post(f"{LIST}/{link_uuid}/refunds", data=form_of(shown, amount=""))
        ended = (await client.get(rest.headers["location"])).text
    said = text_of(shown.text)
    assert 'role="status">Reembolso de R$ 40,00 concluído.' in shown.text
    assert "Situação: Reembolsado em parte" in said
    assert "Reembolsado R$ 40,00" in said
    assert 'name="amount" type="text" value="60,00"' in shown.text
    refund_row = re.search(r"<tr data-refund=[^>]+>(.*?)</tr>", shown.text, re.S)
    assert refund_row and " R$ 40,00 Concluído Item em falta — " in text_of(refund_row.group(1))
    assert too_much.status_code == 400
    assert "Valor a devolver (R$) Mais do que ainda pode ser devolvido." in text_of(too_much.text)
    assert "Nada foi reembolsado." in too_much.text
    assert rest.status_code == 303
    assert 'role="status">Reembolso de R$ 60,00 concluído.' in ended
    assert "Situação: Reembolsado" in text_of(ended) and 'class="refund-form"' not in ended
    shown_api = await details(merchant, link_uuid)
    assert [r["amount"] for r in shown_api["refunds"]] == [40, 60]
    assert shown_api["status"]["description"] == "REFUNDED"


async def test_a_refund_the_card_processor_refuses_is_shown_failed_with_its_reason(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    link = await create(merchant, amount=Decimal("50.00"))
    link_uuid = link["linkPaymentUuid"]
    await pay(service, merchant, link_uuid, METHOD_CARD)
    async with open_portal(merchant, language="en") as client:
        page = await client.get(f"{LIST}/{link_uuid}")
        # The sandbox's card processor refuses amounts ending in 13 cents.
        sent = await client.post(f"{LIST}/{link_uuid}/refunds", data=form_of(page, amount="10.13"))
        shown = (await client.get(sent.headers["location"])).text
    refunds = (await details(merchant, link_uuid))["refunds"]
    assert [r["status"] for r in refunds] == ["FAILED"]
    reason = refunds[0]["failureReason"]
    assert f'role="status">The refund of R$ 10.13 failed: {reason}' in shown
    assert "Status: Paid" in text_of(shown)
    assert 'name="amount" type="text" value="50.00"' in shown  # a failed refund took nothing


async def test_a_pix_refund_is_shown_pending_until_the_provider_settles_it(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    link = await create(merchant, amount=Decimal("40.00"))
    link_uuid = link["linkPaymentUuid"]
    await pay(service, merchant, link_uuid, METHOD_PIX)
    async with open_portal(merchant, language="en") as client:
        page = await client.get(f"{LIST}/{link_uuid}")
        sent = await client.post(f"{LIST}/{link_uuid}/refunds", data=form_of(page, amount="15"))
        pending = (await client.get(sent.headers["location"])).text
        with clock.freeze(clock.now() + timedelta(seconds=6)):
            assert await run_due_refunds(service.database, service.app.state.refunder) == 1
        settled = (await client.get(f"{LIST}/{link_uuid}")).text
    assert 'role="status">Refund of R$ 15.00 asked for: pending.' in pending
    assert "Status: Paid" in text_of(pending)
    assert 'name="amount" type="text" value="25.00"' in pending  # what is pending is taken
    refund_row = re.search(r"<tr data-refund=[^>]+>(.*?)</tr>", settled, re.S)
    assert refund_row and " R$ 15.00 Succeeded " in text_of(refund_row.group(1))
    assert "Status: Partially refunded" in text_of(settled)


async def test_a_link_that_cannot_be_refunded_says_why(service: RunningService) -> None:
    merchant = await service.merchant()
    link = await create(merchant, amount=Decimal("30.00"))
    link_uuid = link["linkPaymentUuid"]
    async with open_portal(merchant, language="en") as client:
        page = await client.get(f"{LIST}/{link_uuid}")
        assert 'class="refund-form"' not in page.text
        refused = await client.post(
            f"{LIST}/{link_uuid}/refunds",
            data={"csrf_token": csrf_token(page), "key": str(uuid.uuid4()), "amount": "10.00"},
        )
    assert refused.status_code == 409
    assert "This link cannot be refunded: the payment link is CREATED" in refused.text
    assert (await details(merchant, link_uuid))["refunds"] == []


async def test_a_pix_payment_shows_its_receipt(service: RunningService) -> None:
    merchant = await service.merchant()
    link = await create(merchant)
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    receipt = (await details(merchant, link["linkPaymentUuid"]))["payment"]["paymentReceipt"]
    async with open_portal(merchant, language="en") as client:
        said = text_of((await client.get(f"{LIST}/{link['linkPaymentUuid']}")).text)
    assert "Method Pix Payment ID pay_" in said
    assert f"Receipt {receipt}" in said and "Instalments 1 Amount paid R$ 150.00" in said


async def test_a_read_only_session_sees_links_but_no_action_and_is_refused_one(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    created = await create(merchant)
    paid = await create(merchant)
    await pay(service, merchant, paid["linkPaymentUuid"], METHOD_CARD)
    async with open_portal(merchant, readOnly=True) as client:
        listed = await client.get(LIST)
        page = await client.get(f"{LIST}/{created['linkPaymentUuid']}")
        paid_page = await client.get(f"{LIST}/{paid['linkPaymentUuid']}")
        new_form = await client.get(f"{LIST}/new")
        token = csrf_token(page)  # the sign-out form's
        key = str(uuid.uuid4())
        posts = [
            await client.post(LIST, data={"csrf_token": token, "key": key, **new_link()}),
            await client.post(
                f"{LIST}/{created['linkPaymentUuid']}/cancel", data={"csrf_token": token}
            ),
            await client.post(
                f"{LIST}/{paid['linkPaymentUuid']}/refunds",
                data={"csrf_token": token, "key": key, "amount": "1,00"},
            ),
        ]
    assert created["linkPaymentUuid"] in listed.text
    assert "/portal/payment-links/new" not in listed.text
    for shown in (page.text, paid_page.text):
        assert "<form" in shown and shown.count("<form") == 1  # signing out only
        assert "Cancelar link" not in shown and 'name="key"' not in shown
    assert "checkout-url" in page.text  # the URL and its QR are still shown
    assert new_form.status_code == 403
    assert [post.status_code for post in posts] == [403, 403, 403]
    assert (await details(merchant, created["linkPaymentUuid"]))["status"]["code"] == 1
    assert (await details(merchant, paid["linkPaymentUuid"]))["refunds"] == []
    assert len((await listing(merchant))["content"]) == 2


async def test_another_customers_link_is_never_shown_nor_changed(service: RunningService) -> None:
    merchant = await service.merchant()
    other = await service.merchant()
    theirs = await create(other)
    their_paid = await create(other)
    await pay(service, other, their_paid["linkPaymentUuid"], METHOD_CARD)
    async with open_portal(merchant) as client:
        page = await client.get(f"{LIST}/new")
        shown = await client.get(f"{LIST}/{theirs['linkPaymentUuid']}")
        cancelled = await client.post(
            f"{LIST}/{theirs['linkPaymentUuid']}/cancel", data={"csrf_token": csrf_token(page)}
        )
        refunded = await client.post(
            f"{LIST}/{their_paid['linkPaymentUuid']}/refunds", data=form_of(page, amount="")
        )
        nonsense = await client.get(f"{LIST}/not-a-uuid")
    assert [shown.status_code, cancelled.status_code, refunded.status_code] == [404, 404, 404]
    assert "Não encontrado" in shown.text and "Maria da Silva" not in shown.text
    assert nonsense.status_code in (400, 404) and "Traceback" not in nonsense.text
    assert (await details(other, theirs["linkPaymentUuid"]))["status"]["code"] == 1
    assert (await details(other, their_paid["linkPaymentUuid"]))["refunds"] == []
    await cancel(other, theirs["linkPaymentUuid"])  # still theirs to cancel


async def test_a_form_without_the_key_its_page_gave_is_refused(service: RunningService) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant) as client:
        blank = await client.get(f"{LIST}/new")
        fields = form_of(blank, **new_link())
        keyless = await client.post(LIST, data={**fields, "key": ""})
        made_up = await client.post(LIST, data={**fields, "key": "not-a-uuid"})
    assert keyless.status_code == made_up.status_code == 400
    assert "Não foi possível atender o pedido" in keyless.text
    assert (await listing(merchant))["content"] == []


async def test_a_long_list_is_paged_keeping_its_filters(service: RunningService) -> None:
    merchant = await service.merchant()
    for _ in range(21):
        await create(merchant, userReference="paged")
    async with open_portal(merchant, language="en") as client:
        first = unescape((await client.get(LIST, params={"userReference": "paged"})).text)
        nexts = re.findall(r'<a href="([^"]+)">Next page</a>', first)
        assert "Page 1 of 2" in first and "Previous page" not in first
        assert len(nexts) == 1 and "userReference=paged" in nexts[0] and "page=1" in nexts[0]
        second = unescape((await client.get(nexts[0])).text)
    assert "Page 2 of 2" in second and "Next page" not in second
    assert re.search(r'<a href="[^"]*page=0[^"]*">Previous page</a>', second)
    assert len(re.findall(r'href="/portal/payment-links/[0-9a-f-]{36}"', second)) == 1
