"""Listing a customer's payment links: pages with their total, and the report's counts and sums
by day, status and method."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, NamedTuple

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.clock import clock
from tucano.core.money import from_cents
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.payment_links.link_filters import LinkFilters
from tucano.payment_links.list_statements import (
    compiled_list,
    list_statements,
    shape_and_values,
    tally_statement,
)
from tucano.payment_links.reads import payment_view_of
from tucano.payment_links.schemas import (
    METHOD_CARD,
    METHOD_PIX,
    PaymentView,
)

# Offsets from which the list counts before it reads a page (see list_links).
DEEP_OFFSET = 10_000


async def list_links(
    database: Database,
    *,
    customer_id: int,
    filters: LinkFilters,
    sort: Sequence[str],
    page: PageRequest,
) -> tuple[list[tuple[Any, PaymentView | None]], int]:
    """One page of the customer's matched links with their payments (rows with the links'
    column names, as `read_link` gives), and how many links match in all. Read by statements
    compiled once per shape, straight on the driver's connection: SQLAlchemy's execution
    machinery costs more here than building the rows."""
    shape, values = shape_and_values(database.dialect, customer_id, filters, clock.now(), sort)
    values |= {"offset": page.offset, "limit": page.size}
    if page.offset < DEEP_OFFSET:
        # The page and the total in one statement: one round trip, and on PostgreSQL one
        # snapshot, so a link created or paid meanwhile cannot make them disagree.
        listed, total = compiled_list(shape)
        async with database.compiled_read_connection() as connection:
            rows = await listed.all(connection, values)
            if rows:
                return [(row, payment_view_of(row)) for row in rows], int(rows[0].matched_total)
            # Past the last page (or nothing matches): the total alone.
            return [], int(await total.first(connection, values) or 0)
    # A deep page steps over its offset for a while: off SQLite's loop thread, and the total
    # first, so that a page past the end is answered without stepping over every link.
    statements = list_statements(shape)
    async with database.bulk_read_engine.connect() as connection:
        counted = int(await connection.scalar(statements.total, values) or 0)
        if page.offset >= counted:
            return [], counted
        rows = (await connection.execute(statements.page, values)).all()
        if rows:
            return [(row, payment_view_of(row)) for row in rows], int(rows[0].matched_total)
        return [], int(await connection.scalar(statements.total, values) or 0)


class Tally(NamedTuple):
    """Matched links of one UTC day, status (as seen now) and payment method (0: not paid)."""

    day: date
    status: str
    method: int
    links: int
    cents: int


async def tally(
    session: AsyncSession, *, customer_id: int, filters: LinkFilters, now: datetime | None = None
) -> list[Tally]:
    """How many links match, and for how much, by day, status and method, in one statement
    (see _tallied)."""
    now = now or clock.now()
    shape, values = shape_and_values(session.get_bind().dialect.name, customer_id, filters, now, ())
    rows = await session.execute(tally_statement(shape), values)
    return [
        Tally(day, status, method, int(count), int(cents))
        for day, status, method, count, cents in rows
        if count
    ]


async def report(
    session: AsyncSession, *, customer_id: int, filters: LinkFilters
) -> dict[str, Any]:
    """Counts and sums over every matched link, computed by the database (see `tally`)."""
    by_status: dict[str, list[int]] = {name: [0, 0] for name in ("CREATED", "PAID", "EXPIRED")}
    by_method: dict[int, list[int]] = {METHOD_CARD: [0, 0], METHOD_PIX: [0, 0]}
    by_day: dict[date, list[int]] = {}
    for row in await tally(session, customer_id=customer_id, filters=filters):
        sums = [by_status[row.status], by_day.setdefault(row.day, [0, 0])]
        if row.method in by_method:
            sums.append(by_method[row.method])
        for counted in sums:
            counted[0] += row.links
            counted[1] += row.cents
    return {
        "start_date": filters.start,
        "end_date": filters.end,
        "total_count": sum(count for count, _ in by_status.values()),
        "total_amount": from_cents(sum(cents for _, cents in by_status.values())),
        "by_status": [
            {"status": name, "count": count, "amount": from_cents(cents)}
            for name, (count, cents) in by_status.items()
        ],
        "by_payment_method": [
            {"payment_method": method, "count": count, "amount": from_cents(cents)}
            for method, (count, cents) in by_method.items()
        ],
        "by_day": [
            {"date": day.isoformat(), "count": count, "amount": from_cents(cents)}
            for day, (count, cents) in sorted(by_day.items())
        ],
    }
