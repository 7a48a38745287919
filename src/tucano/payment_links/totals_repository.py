"""Day totals of payment links: exact counts and sums for lists and reports without reading every
link (a customer with a million links would otherwise have each list and report count them all).

Writers add a LinkDayChange in the transaction that makes the change: a create adds one CREATED
link, a payment moves one from CREATED to PAID with its method. These are inserts, so writers
never wait for each other on a total's row. A periodic job folds the changes into LinkDayTotal;
several processes may run it at once, each change being taken (locked, and skipped by the
others) by one of them. A reader adds totals and changes in the same statement, so it sees every
change exactly once whether or not it has been folded.

Days are Brasília's (`America/Sao_Paulo`): a report's `byDay` counts a link on the day it was
created there (decisions.md), and so do the totals.

What a total says about status: the CREATED links of (day d, validity e) all expire during day
d + e, every day lasting 24 hours. Before that day none of them has expired, after it all have;
on that day each link's own moment decides, so the reader takes those few links one by one
(matching.tallied). Around a daylight-saving change (Brazil had them until 2019) a link may
expire up to an hour into the next or the previous day: the reader then takes the groups of the
days either side one by one too.
"""

from __future__ import annotations

from datetime import date
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Date,
    Select,
    Table,
    and_,
    case,
    delete,
    func,
    insert,
    literal,
    not_,
    select,
    type_coerce,
)
from sqlalchemy.dialects import postgresql, sqlite

from tucano.brazil.brasilia_time import BRASILIA, brasilia_date
from tucano.db.engines import SQLITE_BRASILIA_DAY
from tucano.db.repository import Repository
from tucano.payment_links.models import LinkDayChange, LinkDayTotal, Payment, PaymentLink

TOTALS = cast(Table, LinkDayTotal.__table__)
CHANGES = cast(Table, LinkDayChange.__table__)
KEY = ("customer_id", "day", "expiration_days", "status", "payment_method")
# The columns of a change, as `change` gives them.
CHANGE_COLUMNS = (*KEY, "link_count", "amount_cents")
UNPAID = 0
_ADD_CHANGES = insert(CHANGES)
# Changes folded per run of the job (it runs again at once while there are more).
FOLD_BATCH = 10_000


def change(link: PaymentLink, *, status: str, method: int, sign: int) -> dict[str, Any]:
    """The change of one link counted in (sign 1) or out (sign -1) of a total."""
    return {
        "customer_id": link.customer_id,
        "day": brasilia_date(link.created_at),
        "expiration_days": link.expiration_days,
        "status": status,
        "payment_method": method,
        "link_count": sign,
        "amount_cents": sign * link.amount_cents,
    }


class DayTotalRepository(Repository[LinkDayTotal]):
    model = LinkDayTotal

    async def record_created(self, link: PaymentLink) -> None:
        await self.session.execute(
            _ADD_CHANGES, [change(link, status="CREATED", method=UNPAID, sign=1)]
        )

    async def record_paid(self, link: PaymentLink, *, method: int) -> None:
        await self.session.execute(
            _ADD_CHANGES,
            [
                change(link, status="CREATED", method=UNPAID, sign=-1),
                change(link, status="PAID", method=method, sign=1),
            ],
        )

    async def record_cancelled(self, link: PaymentLink) -> None:
        await self.record_moved(link, method=UNPAID, before="CREATED", after="CANCELLED")

    async def record_moved(
        self, link: PaymentLink, *, method: int, before: str, after: str
    ) -> None:
        """The link left status `before` for `after`, keeping its payment method."""
        await self.session.execute(
            _ADD_CHANGES,
            [
                change(link, status=before, method=method, sign=-1),
                change(link, status=after, method=method, sign=1),
            ],
        )

    async def fold(self, *, batch: int = FOLD_BATCH) -> int:
        """Fold up to `batch` changes into the totals; how many (the caller commits)."""
        c = CHANGES.c
        taken = list(
            await self.session.scalars(
                select(c.id).order_by(c.id).limit(batch).with_for_update(skip_locked=True)
            )
        )
        if not taken:
            return 0
        summed = await self.session.execute(
            select(*(c[k] for k in KEY), func.sum(c.link_count), func.sum(c.amount_cents))
            .where(c.id.in_(taken))
            .group_by(*(c[k] for k in KEY))
        )
        await self._add_to_totals(
            [dict(zip((*KEY, "link_count", "amount_cents"), row, strict=True)) for row in summed]
        )
        await self.session.execute(delete(CHANGES).where(c.id.in_(taken)))
        return len(taken)

    async def _add_to_totals(self, rows: list[dict[str, Any]]) -> None:
        upsert = (postgresql.insert if self.on_postgresql else sqlite.insert)(TOTALS)
        await self.session.execute(
            upsert.on_conflict_do_update(
                index_elements=list(KEY),
                set_={
                    "link_count": TOTALS.c.link_count + upsert.excluded.link_count,
                    "amount_cents": TOTALS.c.amount_cents + upsert.excluded.amount_cents,
                },
            ),
            rows,
        )

    async def rebuild(self) -> None:
        """Recount every total from the links themselves (after links were loaded by other means
        than the service, as a benchmark does)."""
        links = cast(Table, PaymentLink.__table__)
        payments = cast(Table, Payment.__table__)
        day = brasilia_day(self.on_postgresql, links.c.created_at)
        method = func.coalesce(payments.c.method, UNPAID)
        await self.session.execute(delete(CHANGES))
        await self.session.execute(delete(TOTALS))
        await self.session.execute(
            insert(TOTALS).from_select(
                [*KEY, "link_count", "amount_cents"],
                select(
                    links.c.customer_id,
                    day,
                    links.c.expiration_days,
                    links.c.status,
                    method,
                    func.count(),
                    func.sum(links.c.amount_cents),
                )
                .select_from(links.outerjoin(payments, payments.c.link_id == links.c.id))
                .group_by(
                    links.c.customer_id, day, links.c.expiration_days, links.c.status, method
                ),
            )
        )


def brasilia_day(on_postgresql: bool, moment: Any) -> ColumnElement[date]:
    """The Brasília day of a timestamp column, as a date: PostgreSQL's time-zone database, and
    on SQLite (which has none, and keeps UTC text) the function db.engines registers."""
    if on_postgresql:
        return type_coerce(func.date(func.timezone(BRASILIA.key, moment)), Date)
    return type_coerce(getattr(func, SQLITE_BRASILIA_DAY)(moment), Date)


def days_after(on_postgresql: bool, day: Any, days: Any) -> ColumnElement[date]:
    """`day` plus a number of days held in a column, as a date."""
    if on_postgresql:
        return type_coerce(day + days, Date)
    return type_coerce(func.date(day, func.printf("+%d days", days)), Date)


def total_parts(
    on_postgresql: bool,
    *,
    customer_id: Any,
    first: Any,
    last: Any,
    expiring_first: Any,
    expiring_last: Any,
) -> list[Select[Any]]:
    """Totals and unfolded changes of days [first, last), with the status a reader sees, except
    the CREATED links of groups that expire in [expiring_first, expiring_last], today and
    perhaps a day either side (the caller reads those one by one). The customer and the days
    are values or bound parameters."""
    parts = []
    for table in (TOTALS, CHANGES):
        t = table.c
        expiry_day = days_after(on_postgresql, t.day, t.expiration_days)
        parts.append(
            select(
                t.day.label("day"),
                case(
                    (t.status != "CREATED", t.status),
                    (expiry_day < expiring_first, literal("EXPIRED")),
                    else_=literal("CREATED"),
                ).label("status"),
                t.payment_method.label("method"),
                t.link_count.label("links"),
                t.amount_cents.label("cents"),
            ).where(
                t.customer_id == customer_id,
                t.day >= first,
                t.day < last,
                not_(
                    and_(
                        t.status == "CREATED",
                        expiry_day >= expiring_first,
                        expiry_day <= expiring_last,
                    )
                ),
            )
        )
    return parts
