"""The CSV export of a customer's matched payment links, streamed in chunks."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from tucano.core.clock import clock, format_utc
from tucano.core.money import from_cents
from tucano.db.database import Database
from tucano.payment_links.domain import status_at
from tucano.payment_links.filters import LinkFilters
from tucano.payment_links.listing_repository import ListingRepository
from tucano.payment_links.service import payment_view_of

CSV_COLUMNS = [
    "linkPaymentUuid",
    "creationDate",
    "expirationDate",
    "status",
    "payerName",
    "registrationNumber",
    "amount",
    "numbersInstallments",
    "description",
    "userReference",
    "paymentMethod",
    "paymentId",
    "paymentReceipt",
    "paymentDate",
    "installments",
    "refundedAmount",
]


class CsvForm(StrEnum):
    """The two forms of the CSV: RFC 4180 (`,`, decimal point), or the one Excel in Brazilian
    Portuguese opens as a table (`;`, decimal comma, a UTF-8 byte order mark)."""

    RFC4180 = "rfc4180"
    EXCEL_BR = "excel-br"


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A separator a spreadsheet may split on (`;` in pt-BR Excel, whatever the file's own is, and
# quotes do not protect it there), or a line break an importer may start a row at, followed by
# what would start a formula in the next cell.
_SPLITS_AT = ",;\t\r\n"
_FORMULA_AFTER_SEPARATOR = re.compile(r"([,;\t\r\n])(?=[=+\-@\t\r])")


def _csv_safe(value: object) -> str:
    """A cell as text; what a spreadsheet would run as a formula, at the start of the cell or
    after a separator or line break it may split the cell on, gets a leading quote."""
    text = "" if value is None else str(value)
    if any(separator in text for separator in _SPLITS_AT):
        text = _FORMULA_AFTER_SEPARATOR.sub(r"\1'", text)
    return "'" + text if text.startswith(_FORMULA_START) else text


CSV_CHUNK = 1000


async def stream_csv(
    database: Database,
    *,
    customer_id: int,
    filters: LinkFilters,
    form: CsvForm = CsvForm.RFC4180,
) -> AsyncIterator[str]:
    """Every matched link as CSV in `form`, newest first, read in chunks of CSV_CHUNK links,
    each in a short read of its own: a client that reads slowly holds no database connection
    (nor, on SQLite, the database's lock) while the file streams. Statuses are as of the first
    chunk; a link paid while the file streams may show either way."""
    now = clock.now()
    excel = form is CsvForm.EXCEL_BR
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=";" if excel else ",")
    if excel:
        buffer.write("\ufeff")  # the byte order mark tells Excel the file is UTF-8
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    last: tuple[datetime, int] | None = None
    while True:
        rows = await _read_whole(database, customer_id, filters, now, last)
        if not rows:
            return
        buffer.seek(0)
        buffer.truncate()
        for link in rows:
            payment = payment_view_of(link)
            writer.writerow(
                [
                    _csv_safe(v)
                    for v in (
                        link.uuid,
                        format_utc(link.created_at),
                        format_utc(link.expires_at),
                        status_at(link, now),
                        link.payer_name,
                        link.registration_number,
                        _amount(link.amount_cents, decimal_comma=excel),
                        link.numbers_installments,
                        link.description,
                        link.user_reference,
                        payment.method if payment else None,
                        payment.payment_id if payment else None,
                        payment.payment_receipt if payment else None,
                        format_utc(payment.paid_at) if payment else None,
                        payment.installments if payment else None,
                        _amount(link.refunded_cents, decimal_comma=excel),
                    )
                ]
            )
        yield buffer.getvalue()
        if len(rows) < CSV_CHUNK:
            return
        last = (rows[-1].created_at, rows[-1].id)


def _amount(cents: int, *, decimal_comma: bool) -> str:
    written = f"{from_cents(cents):.2f}"
    return written.replace(".", ",") if decimal_comma else written


async def _read_whole(
    database: Database,
    customer_id: int,
    filters: LinkFilters,
    now: datetime,
    last: tuple[datetime, int] | None,
) -> Sequence[Any]:
    """The next chunk after `last`, read to the end in a read session of its own even if the
    caller is cancelled meanwhile.

    A streamed response is cancelled when its client goes away; a read cancelled mid-statement
    could leave its connection inside a transaction. Shielded, the read finishes and its
    session closes normally; the stream stops after it."""

    async def read() -> Sequence[Any]:
        async with database.read_session() as session:
            return await ListingRepository(session).chunk(
                customer_id=customer_id, filters=filters, now=now, before=last, limit=CSV_CHUNK
            )

    task = asyncio.ensure_future(read())
    # Nobody may wait for the result any more: still collect a failure, so it is not reported
    # as never retrieved.
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return await asyncio.shield(task)
