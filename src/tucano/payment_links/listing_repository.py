"""The statements of a customer's lists, reports and CSV of payment links, each built once per
shape (matching.Shape) with its values bound per request: building a statement and its cache
key anew cost more than the database's work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import CompoundSelect, Select, func, literal_column, select, tuple_, union_all

from tucano.db.postgres import Compiled, read_connection
from tucano.db.repository import Repository
from tucano.payment_links import matching
from tucano.payment_links.filters import LinkFilters
from tucano.payment_links.matching import LINKS, PAYMENTS
from tucano.payment_links.models import PaymentLink

# A link's columns and its payment's (all None until paid), as every reader reads a link.
LINK_WITH_PAYMENT = (
    *LINKS.c,
    PAYMENTS.c.method,
    PAYMENTS.c.payment_id,
    PAYMENTS.c.payment_receipt,
    PAYMENTS.c.paid_at,
    PAYMENTS.c.installments,
    PAYMENTS.c.amount_cents.label("payment_amount_cents"),
)
# Offsets from which the list counts before it reads a page (see page_of).
DEEP_OFFSET = 10_000


class Tally(NamedTuple):
    """Matched links of one Brasília day, status (as seen now) and payment method (0: not
    paid), or (day None) what SUCCEEDED refunds of the matched links of a status and method
    gave back."""

    day: date | None
    status: str
    method: int
    links: int
    cents: int
    refunded_cents: int


class ListingRepository(Repository[PaymentLink]):
    model = PaymentLink

    async def page_of(
        self,
        *,
        customer_id: int,
        filters: LinkFilters,
        sort: Sequence[str],
        now: datetime,
        offset: int,
        limit: int,
    ) -> tuple[Sequence[Any], int]:
        """One page of the matched links (rows of LINK_WITH_PAYMENT's names), and how many
        links match in all."""
        shape, values = matching.shape_and_values(
            self.on_postgresql, customer_id, filters, now, sort
        )
        values |= {"offset": offset, "limit": limit}
        statements = _list_statements(shape)
        if offset >= DEEP_OFFSET:
            # Far down, the total first: a page past the end is then answered without stepping
            # over every matching link to find it empty.
            counted = int(await self.session.scalar(statements.total, values) or 0)
            if offset >= counted:
                return [], counted
        # The page and the total in one statement: one round trip, and on PostgreSQL one
        # snapshot, so a link created or paid meanwhile cannot make them disagree.
        if self.accelerated and offset < DEEP_OFFSET:
            # Straight on the read session's connection: SQLAlchemy's execution costs more here.
            page, total = _compiled_list(shape)
            connection = await read_connection(self.session)
            found: Sequence[Any] = await page.all(connection, values)
            if found:
                return found, int(found[0].matched_total)
            return [], int((await total.first(connection, values))[0])
        rows = (await self.session.execute(statements.page, values)).all()
        if rows:
            return rows, int(rows[0].matched_total)
        # Past the last page (or nothing matches): the total alone.
        return [], int(await self.session.scalar(statements.total, values) or 0)

    async def tally(self, *, customer_id: int, filters: LinkFilters, now: datetime) -> list[Tally]:
        """How many links match, and for how much, by day, status and method, and what their
        refunds gave back, by status and method: in one statement, so on PostgreSQL from one
        snapshot (a refund that ends meanwhile shows in all of a report or in none of it)."""
        shape, values = matching.shape_and_values(self.on_postgresql, customer_id, filters, now, ())
        rows = await self.session.execute(_tally_statement(shape), values)
        return [
            Tally(day, status, method, int(count), int(cents), int(refunded))
            for day, status, method, count, cents, refunded in rows
            if count or refunded
        ]

    async def chunk(
        self,
        *,
        customer_id: int,
        filters: LinkFilters,
        now: datetime,
        before: tuple[datetime, int] | None,
        limit: int,
    ) -> Sequence[Any]:
        """Up to `limit` matched links (rows of LINK_WITH_PAYMENT's names), newest first, after
        the (creation time, id) `before` of the last one read: a CSV in chunks."""
        matched = matching.matched_links(customer_id, filters, now)
        if before is not None:
            matched = matched.where(tuple_(PaymentLink.created_at, PaymentLink.id) < before)
        newest_first = (PaymentLink.created_at.desc(), PaymentLink.id.desc())
        chunk = (
            matched.add_columns(PaymentLink.id).order_by(*newest_first).limit(limit)
        ).subquery()
        return (
            await self.session.execute(
                select(*LINK_WITH_PAYMENT)
                .join(chunk, chunk.c.id == LINKS.c.id)
                .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
                .order_by(LINKS.c.created_at.desc(), LINKS.c.id.desc())
            )
        ).all()


class _ListStatements(NamedTuple):
    page: Select[Any]  # the page's links with the matched total beside each
    total: Select[Any]  # the matched total alone


@lru_cache(maxsize=512)
def _list_statements(shape: matching.Shape) -> _ListStatements:
    filters = matching.bound_filters(shape)
    order = matching.order_by(shape.sort, matching.NOW, on_postgresql=shape.on_postgresql)
    total = matching.matched_total(shape, filters)
    ids = (
        matching.matched_links(matching.CUSTOMER, filters, matching.NOW)
        .add_columns(PaymentLink.id)
        .order_by(*order)
        .offset(matching.OFFSET)
        .limit(matching.LIMIT)
    ).subquery()
    page = (
        select(*LINK_WITH_PAYMENT, total.label("matched_total"))
        .join(ids, ids.c.id == LINKS.c.id)
        .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
        .order_by(*order)
    )
    return _ListStatements(page, select(total))


@lru_cache(maxsize=512)
def _compiled_list(shape: matching.Shape) -> tuple[Compiled, Compiled]:
    """_list_statements(shape), compiled to run straight on asyncpg's connection."""
    statements = _list_statements(shape)
    return Compiled(statements.page), Compiled(statements.total)


@lru_cache(maxsize=512)
def _tally_statement(shape: matching.Shape) -> CompoundSelect[Any]:
    filters = matching.bound_filters(shape)
    counted = matching.tallied(shape, filters)
    links = (
        select(
            counted.c.day,
            counted.c.status,
            counted.c.method,
            func.sum(counted.c.links),
            func.sum(counted.c.cents),
            literal_column("0"),
        )
        .where(*matching.tallied_conditions(counted, filters))
        .group_by(counted.c.day, counted.c.status, counted.c.method)
    )
    return union_all(links, matching.given_back(filters))
