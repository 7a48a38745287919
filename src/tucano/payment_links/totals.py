"""Day totals of payment links: exact counts and sums for lists and reports without reading every
link (a customer with a million links would otherwise have each list and report count them all).

Writers add a LinkDayChange in the transaction that makes the change: a create adds one CREATED
link, a payment moves one from CREATED to PAID with its method. These are inserts, so writers
never wait for each other on a total's row. A periodic job folds the changes into LinkDayTotal;
on PostgreSQL it is one statement that deletes exactly the changes it adds, so several processes
may run it at once and each change is folded once. A reader adds totals and changes in the same
statement, so it sees every change exactly once whether or not it has been folded.

What a total says about status: the CREATED links of (day d, validity e) all expire during day
d + e. Before that day none of them has expired, after it all have; on that day each link's own
moment decides, so the reader takes those few links one by one (see list_statements._tallied).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
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
    literal,
    not_,
    select,
    text,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.payment_links.models import LinkDayChange, LinkDayTotal, Payment, PaymentLink

TOTALS = cast(Table, LinkDayTotal.__table__)
CHANGES = cast(Table, LinkDayChange.__table__)
KEY = ("customer_id", "day", "expiration_days", "status", "payment_method")
# The columns of a change, as `change` gives them.
CHANGE_COLUMNS = (*KEY, "link_count", "amount_cents")
UNPAID = 0


def change(link: PaymentLink, *, status: str, method: int, sign: int) -> dict[str, Any]:
    """The change of one link counted in (sign 1) or out (sign -1) of a total."""
    return {
        "customer_id": link.customer_id,
        "day": link.created_at.astimezone(UTC).date(),
        "expiration_days": link.expiration_days,
        "status": status,
        "payment_method": method,
        "link_count": sign,
        "amount_cents": sign * link.amount_cents,
    }


async def record_created(session: AsyncSession, link: PaymentLink) -> None:
    await session.execute(CHANGES.insert(), [change(link, status="CREATED", method=UNPAID, sign=1)])


async def record_paid(session: AsyncSession, link: PaymentLink, *, method: int) -> None:
    await session.execute(
        CHANGES.insert(),
        [
            change(link, status="CREATED", method=UNPAID, sign=-1),
            change(link, status="PAID", method=method, sign=1),
        ],
    )


# --- folding --------------------------------------------------------------------------------

_FOLD_ON_POSTGRES = text(f"""
WITH folded AS (
    DELETE FROM payment_link_day_changes
     WHERE id IN (SELECT id FROM payment_link_day_changes ORDER BY id LIMIT :batch
                  FOR UPDATE SKIP LOCKED)
    RETURNING {", ".join(KEY)}, link_count, amount_cents
)
INSERT INTO payment_link_day_totals AS t ({", ".join(KEY)}, link_count, amount_cents)
SELECT {", ".join(KEY)}, sum(link_count), sum(amount_cents) FROM folded
 GROUP BY {", ".join(KEY)}
ON CONFLICT ({", ".join(KEY)}) DO UPDATE
   SET link_count = t.link_count + EXCLUDED.link_count,
       amount_cents = t.amount_cents + EXCLUDED.amount_cents
""")  # noqa: S608 - our own column names


async def fold_day_changes(session: AsyncSession, *, batch: int = 50_000) -> int:
    """Fold up to `batch` changes into the totals; returns how many (the caller commits)."""
    if session.get_bind().dialect.name == "postgresql":
        result = await session.execute(_FOLD_ON_POSTGRES, {"batch": batch})
        # rowcount is the totals' rows written; say whether anything was folded.
        return int(getattr(result, "rowcount", 0) or 0)
    # SQLite: under the database's write lock no change can arrive meanwhile.
    c = CHANGES.c
    oldest = select(c.id).order_by(c.id).limit(batch).subquery()
    last = await session.scalar(select(func.max(oldest.c.id)))
    if last is None:
        return 0
    summed = list(
        await session.execute(
            select(*(c[k] for k in KEY), func.sum(c.link_count), func.sum(c.amount_cents))
            .where(c.id <= last)
            .group_by(*(c[k] for k in KEY))
        )
    )
    upsert = sqlite_insert(TOTALS)
    await session.execute(
        upsert.on_conflict_do_update(
            index_elements=list(KEY),
            set_={
                "link_count": TOTALS.c.link_count + upsert.excluded.link_count,
                "amount_cents": TOTALS.c.amount_cents + upsert.excluded.amount_cents,
            },
        ),
        [dict(zip((*KEY, "link_count", "amount_cents"), row, strict=True)) for row in summed],
    )
    removed = await session.execute(delete(CHANGES).where(c.id <= last))
    return int(getattr(removed, "rowcount", 0) or 0)


async def rebuild(session: AsyncSession) -> None:
    """Recount every total from the links themselves (after links were loaded by other means
    than the service, as a benchmark does)."""
    links = cast(Table, PaymentLink.__table__)
    payments = cast(Table, Payment.__table__)
    day = utc_day(session.get_bind().dialect.name, links.c.created_at)
    method = func.coalesce(payments.c.method, UNPAID)
    await session.execute(delete(CHANGES))
    await session.execute(delete(TOTALS))
    insert = (
        postgresql_insert(TOTALS)
        if session.get_bind().dialect.name == "postgresql"
        else sqlite_insert(TOTALS)
    )
    await session.execute(
        insert.from_select(
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
            .group_by(links.c.customer_id, day, links.c.expiration_days, links.c.status, method),
        )
    )


# --- reading --------------------------------------------------------------------------------


def utc_day(dialect: str, moment: Any) -> ColumnElement[date]:
    """The UTC day of a timestamp column, as a date."""
    if dialect == "postgresql":
        return type_coerce(func.date(func.timezone("UTC", moment)), Date)
    return type_coerce(func.date(moment), Date)  # SQLite keeps UTC text


def days_after(dialect: str, day: Any, days: Any) -> ColumnElement[date]:
    """`day` plus a number of days held in a column, as a date."""
    if dialect == "postgresql":
        return type_coerce(day + days, Date)
    return type_coerce(func.date(day, func.printf("+%d days", days)), Date)


def full_days(start: datetime, end: datetime) -> tuple[date, date]:
    """The UTC days wholly inside [start, end] (end inclusive, to the millisecond), as a
    half-open range of dates; empty (first >= last) when there is none."""
    # At the very end of year 9999 the next day does not exist: that day is read link by link.
    if start.timetz() == time(0, tzinfo=UTC):
        first = start.date()
    else:
        first = start.date() + timedelta(1) if start.date() < date.max else date.max
    try:
        last = (end + timedelta(milliseconds=1)).date()
    except OverflowError:
        last = end.date()
    return first, last


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def total_parts(
    dialect: str, *, customer_id: Any, first: Any, last: Any, today: Any
) -> list[Select[Any]]:
    """Totals and unfolded changes of days [first, last), with the status a reader sees, except
    the CREATED links of groups that expire today (the caller reads those one by one). The
    customer and the days are values or bound parameters."""
    parts = []
    for table in (TOTALS, CHANGES):
        t = table.c
        expiry_day = days_after(dialect, t.day, t.expiration_days)
        parts.append(
            select(
                t.day.label("day"),
                case(
                    (t.status == "PAID", literal("PAID")),
                    (expiry_day < today, literal("EXPIRED")),
                    else_=literal("CREATED"),
                ).label("status"),
                t.payment_method.label("method"),
                t.link_count.label("links"),
                t.amount_cents.label("cents"),
            ).where(
                t.customer_id == customer_id,
                t.day >= first,
                t.day < last,
                not_(and_(t.status == "CREATED", expiry_day == today)),
            )
        )
    return parts
