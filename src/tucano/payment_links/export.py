"""The CSV export of a customer's matched payment links, streamed in chunks."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import AsyncIterator
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Select, select, tuple_

from tucano.core.clock import clock, format_utc
from tucano.core.money import from_cents
from tucano.db.database import Database
from tucano.payment_links.link_filters import LinkFilters, matched_links
from tucano.payment_links.models import PaymentLink
from tucano.payment_links.reads import LINKS, PAYMENT_VIEW, PAYMENTS, payment_view_of
from tucano.payment_links.schemas import status_at

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
        matched = matched_links(customer_id, filters, now)
        if last is not None:
            matched = matched.where(tuple_(PaymentLink.created_at, PaymentLink.id) < last)
        newest_first = (PaymentLink.created_at.desc(), PaymentLink.id.desc())
        chunk = (
            matched.add_columns(PaymentLink.id).order_by(*newest_first).limit(CSV_CHUNK)
        ).subquery()
        rows = await _read_whole(
            database,
            select(*LINKS.c, *PAYMENT_VIEW)
            .join(chunk, chunk.c.id == LINKS.c.id)
            .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
            .order_by(LINKS.c.created_at.desc(), LINKS.c.id.desc()),
        )
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


async def _read_whole(database: Database, statement: Select[Any]) -> list[Any]:
    """`statement`'s rows, read to the end even if the caller is cancelled meanwhile.

    A streamed response is cancelled when its client goes away; a read cancelled mid-statement
    would leave its connection inside a transaction, which on SQLite holds the write lock (see
    `_on_begin` in db.engines, and docs/adr/payment-links.md). Shielded, the read finishes and
    its session closes normally; the stream stops after it."""

    async def read() -> list[Any]:
        async with database.bulk_read_session() as session:
            return list(await session.execute(statement))

    task = asyncio.ensure_future(read())
    # Nobody may wait for the result any more: still collect a failure, so it is not reported
    # as never retrieved.
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return await asyncio.shield(task)
