"""The report as CSV over HTTP on each database."""

from __future__ import annotations

import asyncio
import csv
import io
import re
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import update

from tests.support.payment_links import (
    BASE,
    cancel,
    create,
    listing,
    pay,
    refund,
    tx,
    window,
)
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.payment_links import export
from tucano.payment_links.domain import METHOD_CARD
from tucano.payment_links.models import PaymentLink


async def test_report_as_csv_lists_every_matched_link(merchant: Merchant) -> None:
    made = [await create(merchant, payerName=name) for name in ("Ana", "=HYPERLINK(1)", "Caio")]
    response = await merchant.get(
        f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    # One address, two representations by Accept: a cache must key on it.
    assert response.headers["vary"] == "Accept"
    as_json = await merchant.get(f"{BASE}/report", params=window(), headers=tx())
    assert as_json.headers["vary"] == "Accept"
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 3
    assert {r["linkPaymentUuid"] for r in rows} == {m["linkPaymentUuid"] for m in made}
    assert {r["payerName"] for r in rows} == {"Ana", "'=HYPERLINK(1)", "Caio"}
    assert all(r["amount"] == "150.00" and r["status"] == "CREATED" for r in rows)


async def test_a_csv_cell_stays_one_cell_with_either_separator(merchant: Merchant) -> None:
    # `;` is Excel's separator in pt-BR: unquoted, "a;=cmd" would put a formula in a cell.
    await create(merchant, description="a;=cmd|' /C calc'!A0;")
    response = await merchant.get(
        f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
    )
    for separator in (",", ";", "\t"):
        cells = [
            c for row in csv.reader(io.StringIO(response.text), delimiter=separator) for c in row
        ]
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells), separator


async def report_csv(merchant: Merchant, **params: str) -> httpx.Response:
    response = await merchant.get(
        f"{BASE}/report", params=window(**params), headers={**tx(), "Accept": "text/csv"}
    )
    assert response.status_code == 200, response.text
    return response


async def store_as_an_earlier_release_did(
    merchant: Merchant, link: dict[str, Any], **values: str
) -> None:
    """Text a link kept from before text fields refused control characters."""
    async with merchant.service.database.session() as session:
        await session.execute(
            update(PaymentLink)
            .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
            .values(**values)
        )
        await session.commit()


@pytest.mark.parametrize("form", ["rfc4180", "excel-br"])
async def test_a_formula_after_a_line_break_is_quoted_too(merchant: Merchant, form: str) -> None:
    link = await create(merchant)
    await store_as_an_earlier_release_did(
        merchant, link, payer_name="Ana\n=HYPERLINK(1)", description="x\r\n@SUM(1)\r+1"
    )
    text = (await report_csv(merchant, csvFormat=form)).text.removeprefix("\ufeff")
    # Read line by line, as an importer that ignores quotes does, then split on any separator.
    pieces = [
        piece for line in re.split(r"\r\n|\r|\n", text) for piece in re.split(r"[,;\t]", line)
    ]
    assert not any(piece.lstrip('"').startswith(("=", "+", "-", "@")) for piece in pieces)
    delimiter = ";" if form == "excel-br" else ","
    (row,) = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    assert row["payerName"] == "Ana\n'=HYPERLINK(1)"
    assert row["description"] == "x\r\n'@SUM(1)\r'+1"


async def test_the_excel_br_form_has_semicolons_decimal_commas_and_a_byte_order_mark(
    merchant: Merchant,
) -> None:
    made = [
        await create(merchant, amount=Decimal("1234.50"), payerName="Conceição; Filhos"),
        await create(merchant, amount=Decimal("0.07"), description="açaí, 2 kg"),
    ]
    response = await report_csv(merchant, csvFormat="excel-br")
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.content.startswith(b"\xef\xbb\xbf" + b"linkPaymentUuid;creationDate;")
    text = response.content.decode("utf-8-sig")
    rows = {r["linkPaymentUuid"]: r for r in csv.DictReader(io.StringIO(text), delimiter=";")}
    assert set(rows) == {m["linkPaymentUuid"] for m in made}
    first, second = (rows[m["linkPaymentUuid"]] for m in made)
    assert first["amount"] == "1234,50" and second["amount"] == "0,07"
    assert first["payerName"] == "Conceição; Filhos"
    assert second["description"] == "açaí, 2 kg"
    assert list(first) == export.CSV_COLUMNS


async def test_the_rfc4180_form_is_the_default_and_can_be_named(merchant: Merchant) -> None:
    await create(merchant, amount=Decimal("1234.50"), description="açaí; 2 kg")
    default = await report_csv(merchant)
    named = await report_csv(merchant, csvFormat="rfc4180")
    for response in (default, named):
        assert not response.content.startswith(b"\xef\xbb\xbf")
        (row,) = csv.DictReader(io.StringIO(response.text))
        assert row["amount"] == "1234.50" and row["description"] == "açaí; 2 kg"
    assert default.text.splitlines()[1:] == named.text.splitlines()[1:]


HEADER = (
    "linkPaymentUuid,creationDate,expirationDate,status,payerName,registrationNumber,amount,"
    "numbersInstallments,description,userReference,paymentMethod,paymentId,paymentReceipt,"
    "paymentDate,installments,refundedAmount"
)


@pytest.mark.parametrize("form", ["rfc4180", "excel-br"])
async def test_the_csv_shows_cancelled_and_refunded_links_and_what_was_given_back(
    service: RunningService, merchant: Merchant, form: str
) -> None:
    await create(merchant, payerName="Open")
    await cancel(merchant, (await create(merchant, payerName="Cancelled"))["linkPaymentUuid"])
    whole, part = [
        (await create(merchant, payerName=name, amount=Decimal(amount)))["linkPaymentUuid"]
        for name, amount in (("Whole", "1234.50"), ("Part", "100.00"))
    ]
    for paid in (whole, part):
        await pay(service, merchant, paid, METHOD_CARD)
    await refund(merchant, whole)
    await refund(merchant, part, amount=Decimal("30.05"))
    assert (await refund(merchant, part, amount=Decimal("5.13")))["status"] == "FAILED"
    separator, point = (";", ",") if form == "excel-br" else (",", ".")
    text = (await report_csv(merchant, csvFormat=form)).content.decode("utf-8-sig")
    assert text.splitlines()[0] == HEADER.replace(",", separator)
    rows = {r["payerName"]: r for r in csv.DictReader(io.StringIO(text), delimiter=separator)}
    shown = {name: (row["status"], row["refundedAmount"]) for name, row in rows.items()}
    assert shown == {
        "Open": ("CREATED", "0.00".replace(".", point)),
        "Cancelled": ("CANCELLED", "0.00".replace(".", point)),
        "Whole": ("REFUNDED", "1234.50".replace(".", point)),
        "Part": ("PAID", "30.05".replace(".", point)),  # refunded in part: still PAID
    }
    assert rows["Whole"]["paymentMethod"] == "1" and rows["Whole"]["installments"] == "1"
    for status, name in (("CANCELLED", "Cancelled"), ("REFUNDED", "Whole")):
        filtered = await report_csv(merchant, csvFormat=form, status=status)
        only = csv.DictReader(
            io.StringIO(filtered.content.decode("utf-8-sig")), delimiter=separator
        )
        assert [row["payerName"] for row in only] == [name]


async def test_an_unknown_csv_format_is_refused(merchant: Merchant) -> None:
    response = await merchant.get(
        f"{BASE}/report",
        params=window(csvFormat="excel"),
        headers={**tx(), "Accept": "text/csv"},
    )
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == ["csvFormat must be one of: rfc4180, excel-br"]


async def test_the_json_report_ignores_the_csv_format(merchant: Merchant) -> None:
    await create(merchant)
    response = await merchant.get(
        f"{BASE}/report", params=window(csvFormat="excel-br"), headers=tx()
    )
    assert response.status_code == 200
    assert response.json()["totalCount"] == 1


async def test_csv_streams_in_chunks_without_gaps_or_repeats(
    merchant: Merchant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "CSV_CHUNK", 3)
    with clock.freeze() as frozen:
        made = []
        for _ in range(7):
            made.append(await create(merchant))
            frozen.advance(timedelta(milliseconds=1 if len(made) % 2 else 0))  # ties too
    response = await merchant.get(
        f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
    )
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert sorted(r["linkPaymentUuid"] for r in rows) == sorted(m["linkPaymentUuid"] for m in made)
    dates = [r["creationDate"] for r in rows]
    assert dates == sorted(dates, reverse=True)  # newest first


async def test_a_csv_download_cut_off_midway_leaves_the_database_usable(
    merchant: Merchant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Many short chunk reads per download, so that a client going away lands in one of them.
    monkeypatch.setattr(export, "CSV_CHUNK", 2)
    for _ in range(60):
        await create(merchant)
    host, port = urlsplit(merchant.service.base_url).netloc.split(":")
    query = "&".join(f"{k}={v}" for k, v in window().items())
    request = (
        f"GET {BASE}/report?{query} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {merchant.token}\r\nAccept: text/csv\r\n"
        f"x-transaction-id: {uuid.uuid4()}\r\n\r\n"
    ).encode()
    for attempt in range(40):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request)
        await reader.readuntil(b"\r\n\r\n")  # the headers: the body is streaming
        await asyncio.sleep(attempt % 8 / 1000)
        writer.transport.abort()  # a reset, mid-stream
    await asyncio.sleep(0.2)
    # Writes and reads still go through, promptly.
    async with asyncio.timeout(5):
        await create(merchant)
        assert (await listing(merchant))["totalElements"] == 61
