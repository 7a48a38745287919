"""The report as CSV over HTTP on each database."""

from __future__ import annotations

import asyncio
import csv
import io
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

import pytest

from tests.support.payment_links import (
    BASE,
    create,
    listing,
    tx,
    window,
)
from tests.support.service import Merchant
from tucano.core.clock import clock
from tucano.payment_links import export


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
