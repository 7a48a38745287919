"""The portal's reports over HTTP: totals by status and payment method, the chart of amounts per
day with its table, and the CSV of the links, all the session's customer's only, with the
list's filters; a read-only session sees and downloads them."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal
from html import unescape

from tests.support.payment_links import cancel, create, pay, refund
from tests.support.portal import open_portal
from tests.support.service import RunningService
from tucano.brazil.brasilia_time import brasilia_date
from tucano.core.clock import clock
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX

PAGE = "/portal/reports"
CSV = "/portal/reports/csv"


def text_of(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


def table_rows(page: str, table_id: str) -> list[str]:
    found = re.search(rf'<table [^>]*id="{table_id}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert found, page
    return [text_of(row) for row in re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)]


async def test_the_report_has_totals_by_status_and_method_and_a_chart_of_the_days(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    other = await service.merchant()
    await create(merchant, amount=Decimal("10.00"))
    by_card = await create(merchant, amount=Decimal("100.00"))
    await pay(service, merchant, by_card["linkPaymentUuid"], METHOD_CARD)
    await refund(merchant, by_card["linkPaymentUuid"], amount=25)
    by_pix = await create(merchant, amount=Decimal("1234.50"))
    await pay(service, merchant, by_pix["linkPaymentUuid"], METHOD_PIX)
    cancelled = await create(merchant, amount=Decimal("5.00"))
    await cancel(merchant, cancelled["linkPaymentUuid"])
    await create(other, amount=Decimal("777.77"))
    async with open_portal(merchant) as client:
        page = await client.get(PAGE)
        pix_only = await client.get(PAGE, params={"paymentMethod": "2"})
    assert page.status_code == 200
    said = text_of(page.text)
    assert "Links 4 Valor dos links R$ 1.349,50 Reembolsado R$ 25,00" in said
    assert table_rows(page.text, "by-status") == [
        "Criado 1 R$ 10,00 R$ 0,00",
        "Pago 2 R$ 1.334,50 R$ 25,00",
        "Expirado 0 R$ 0,00 R$ 0,00",
        "Cancelado 1 R$ 5,00 R$ 0,00",
        "Reembolsado 0 R$ 0,00 R$ 0,00",
    ]
    assert table_rows(page.text, "by-method") == [
        "Cartão de crédito 1 R$ 100,00 R$ 25,00",
        "Pix 1 R$ 1.234,50 R$ 0,00",
    ]
    today = brasilia_date(clock.now())
    assert table_rows(page.text, "days") == [f"{today:%d/%m/%Y} 4 R$ 1.349,50"]
    # One bar a day of the last 30, today's the only one drawn up to the top.
    bars = re.findall(
        r'<rect x="[0-9.]+" y="[0-9.]+" width="[0-9.]+" height="([0-9.]+)"', page.text
    )
    assert len(bars) == 30 and [h for h in bars if h != "0.0"] == [bars[-1]]
    assert f"<title>{today:%d/%m/%Y}: R$ 1.349,50</title>" in page.text
    assert 'role="img" aria-labelledby="chart-title chart-desc"' in page.text
    assert "o maior valor é R$ 1.349,50" in page.text
    assert "style=" not in page.text
    assert "777,77" not in page.text
    assert "Links 1 Valor dos links R$ 1.234,50" in text_of(pix_only.text)


async def test_a_period_without_links_says_so(service: RunningService) -> None:
    merchant = await service.merchant()
    await create(merchant)
    async with open_portal(merchant, language="en") as client:
        page = await client.get(PAGE, params={"from": "2001-01-01", "to": "2001-01-31"})
        wrong = await client.get(PAGE, params={"to": "yesterday"})
    said = text_of(page.text)
    assert "Links created from 2001-01-01 to 2001-01-31 (Brasília's days)." in said
    assert "Links 0 Amount of the links R$ 0.00" in said
    assert "No link in the period." in said and "<svg" not in page.text
    assert wrong.status_code == 400
    assert "Created to Enter a date as YYYY-MM-DD." in text_of(wrong.text)
    assert "Download CSV" not in wrong.text


async def test_the_csv_has_the_customers_links_in_the_form_asked_for(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    other = await service.merchant()
    mine = [await create(merchant, amount=Decimal(f"{n}1.50")) for n in (1, 2)]
    await pay(service, merchant, mine[1]["linkPaymentUuid"], METHOD_CARD)
    theirs = await create(other)
    async with open_portal(merchant, readOnly=True) as client:
        page = await client.get(PAGE, params={"status": "CREATED"})
        plain = await client.get(CSV, params={"csvFormat": "rfc4180"})
        excel = await client.get(CSV, params={"csvFormat": "excel-br", "status": "PAID"})
        wrong = await client.get(CSV, params={"csvFormat": "xlsx"})
    # The page's form names the filters it shows, and Excel's form first in Portuguese.
    form = re.search(
        r'<form method="get" action="/portal/reports/csv">(.*?)</form>', page.text, re.S
    )
    assert form and '<input type="hidden" name="status" value="CREATED">' in form.group(1)
    assert '<option value="excel-br" selected>' in form.group(1)
    assert ">Baixar CSV</button>" in form.group(1)
    assert plain.status_code == 200
    assert plain.headers["content-type"] == "text/csv; charset=utf-8"
    disposition = plain.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="payment-links-')
    rows = list(csv.DictReader(io.StringIO(plain.text)))
    assert sorted(row["linkPaymentUuid"] for row in rows) == sorted(
        link["linkPaymentUuid"] for link in mine
    )
    assert sorted(row["amount"] for row in rows) == ["11.50", "21.50"]
    assert theirs["linkPaymentUuid"] not in plain.text
    assert excel.content.startswith("\ufeff".encode())
    paid = list(csv.DictReader(io.StringIO(excel.text.removeprefix("\ufeff")), delimiter=";"))
    assert [(row["linkPaymentUuid"], row["amount"]) for row in paid] == [
        (mine[1]["linkPaymentUuid"], "21,50")
    ]
    assert wrong.status_code == 400 and "Traceback" not in wrong.text
