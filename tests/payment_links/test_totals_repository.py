"""Day totals give exactly what reading every link gives: lists' counts and reports, for any
range and any moment, whether the changes have been folded or not, days being Brasília's, across
daylight-saving changes too, with links paid, cancelled and refunded (in full, in part, or not
at all). Both databases."""

from __future__ import annotations

import contextlib
import random
import uuid
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from tests.support.service import new_customer_id
from tucano.brazil.brasilia_time import brasilia_date
from tucano.checkout.card_processor import SandboxCardProcessor
from tucano.config import PixProviderName
from tucano.core.clock import clock
from tucano.core.errors import BadRequest, Conflict
from tucano.db.database import Database
from tucano.payment_links import lifecycle, matching
from tucano.payment_links import service as payment_links
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX, status_at
from tucano.payment_links.filters import LinkFilters
from tucano.payment_links.listing_repository import ListingRepository
from tucano.payment_links.models import LinkDayChange, Payment, PaymentLink, Refund
from tucano.payment_links.schemas import PaymentLinkCreate
from tucano.payment_links.totals_repository import DayTotalRepository
from tucano.pix.provider import StaticCodeProvider
from tucano.refunds.refunder import Refunder
from tucano.refunds.service import request_refund

START = datetime(2026, 3, 1, tzinfo=UTC)
# Brazil's daylight saving time began at midnight on 4 November 2018 (a day of 23 hours) and
# ended on 17 February 2019 (a day of 25 hours): links around them may expire a day off.
DST_BEGAN = datetime(2018, 10, 25, tzinfo=UTC)
DST_ENDED = datetime(2019, 2, 8, tzinfo=UTC)
# The sandbox's refunders: one whose Pix refunds succeed at once, one whose stay PENDING.
REFUNDER = Refunder(
    card=SandboxCardProcessor(),
    pix=StaticCodeProvider(PixProviderName.SANDBOX, refund_delay=timedelta(0)),
)
SLOW_REFUNDER = Refunder(
    card=SandboxCardProcessor(),
    pix=StaticCodeProvider(PixProviderName.SANDBOX, refund_delay=timedelta(days=365)),
)


async def create_at(
    database: Database, customer_id: int, moment: datetime, *, days: int, cents: int = 1000
) -> uuid.UUID:
    data = PaymentLinkCreate(
        payer_name="Payer",
        registration_number="52998224725",
        amount=Decimal(cents) / 100,
        numbers_installments=1,
        expiration_days=days,
    )
    with clock.freeze(moment):
        link = payment_links.new_link(customer_id=customer_id, data=data, autopay_delay=None)
        ref = payment_links.IdempotencyRef(customer_id, uuid.uuid4(), "x")
        await payment_links.create_link(database, ref=ref, link=link, response=b"{}")
    return link.uuid


async def make_links(
    database: Database, customer_id: int, rng: random.Random, start: datetime = START
) -> None:
    """Links over 25 days, some paid a while later (and some of those refunded), some
    cancelled; changes folded now and then."""
    for _ in range(70):
        moment = start + timedelta(
            seconds=rng.randrange(25 * 86400), milliseconds=rng.randrange(1000)
        )
        data = PaymentLinkCreate(
            payer_name="Payer",
            registration_number="52998224725",
            amount=Decimal(rng.randrange(1, 500_000)) / 100,
            numbers_installments=rng.randint(1, 10),
            expiration_days=rng.randint(1, 10),
        )
        with clock.freeze(moment):
            link = payment_links.new_link(customer_id=customer_id, data=data, autopay_delay=None)
            ref = payment_links.IdempotencyRef(customer_id, uuid.uuid4(), "x")
            await payment_links.create_link(database, ref=ref, link=link, response=b"{}")
        later = moment + timedelta(hours=rng.uniform(0, 24 * data.expiration_days - 1))
        if rng.random() < 0.4:
            method = rng.choice([METHOD_CARD, METHOD_PIX])
            with clock.freeze(later):
                async with database.session() as session:
                    stored, _ = await payment_links.get_link(
                        session, customer_id=customer_id, link_uuid=link.uuid
                    )
                    await payment_links.pay_link(session, link=stored, method=method)
                    await session.commit()
            if rng.random() < 0.6:
                await refund_some(database, link, method, later, rng)
        elif rng.random() < 0.2:
            with clock.freeze(later):
                async with database.session() as session:
                    await lifecycle.cancel_link(
                        session, customer_id=customer_id, link_uuid=link.uuid
                    )
                    await session.commit()
        if rng.random() < 0.15:
            async with database.session() as session:
                await DayTotalRepository(session).fold(batch=rng.randint(1, 40))
                await session.commit()


async def refund_some(
    database: Database, link: PaymentLink, method: int, paid_at: datetime, rng: random.Random
) -> None:
    """One to three refunds of a paid link, through the refunds service: what is left, a part
    (perhaps more than is left: refused), 0.13 (which the sandbox fails), or a Pix refund left
    PENDING."""
    at = paid_at
    for _ in range(rng.choice([1, 1, 2, 3])):
        at += timedelta(hours=rng.uniform(0, 48))
        amount = rng.choice([None, 13, rng.randint(1, link.amount_cents)])
        pending = method == METHOD_PIX and rng.random() < 0.25
        request = lifecycle.RefundRequest(link.customer_id, link.uuid, uuid.uuid4(), amount, None)
        # Refused when it asks for more than is left, or nothing is left.
        with clock.freeze(at), contextlib.suppress(BadRequest, Conflict):
            await request_refund(database, SLOW_REFUNDER if pending else REFUNDER, request)


async def truth(
    database: Database, customer_id: int, filters: LinkFilters, now: datetime
) -> tuple[Counter[tuple[object, str, int]], Counter[tuple[str, int]]]:
    """Every matched link read one by one, bucketed in Python; and what its refunds gave back,
    by status and method."""
    counted: Counter[tuple[object, str, int]] = Counter()
    refunded: Counter[tuple[str, int]] = Counter()
    async with database.session() as session:
        rows = await session.execute(
            select(PaymentLink, Payment)
            .outerjoin(Payment, Payment.link_id == PaymentLink.id)
            .where(PaymentLink.customer_id == customer_id)
        )
        for link, payment in rows:
            if not filters.start <= link.created_at <= filters.end:
                continue
            status = status_at(link, now)
            method = payment.method if payment else 0
            if filters.status not in (None, status):
                continue
            if filters.payment_method not in (None, method):
                continue
            key = (brasilia_date(link.created_at), status, method)
            counted[key] += 1
            counted[(*key[:2], -method - 1)] += link.amount_cents  # the cents, apart
            refunded[(status, method)] += link.refunded_cents
    return counted, +refunded


async def read_back(
    database: Database, customer_id: int, filters: LinkFilters, now: datetime
) -> tuple[Counter[tuple[object, str, int]], Counter[tuple[str, int]]]:
    """What a report reads, bucketed as `truth` buckets it."""
    async with database.read_session() as session:
        got = await ListingRepository(session).tally(
            customer_id=customer_id, filters=filters, now=now
        )
    counted: Counter[tuple[object, str, int]] = Counter()
    refunded: Counter[tuple[str, int]] = Counter()
    for row in got:
        if row.day is None:
            refunded[(row.status, row.method)] += row.refunded_cents
        else:
            counted[(row.day, row.status, row.method)] += row.links
            counted[(row.day, row.status, -row.method - 1)] += row.cents
    return +counted, +refunded


@pytest.mark.parametrize(
    "start", [START, DST_BEGAN, DST_ENDED], ids=["2026", "dst-began", "dst-ended"]
)
async def test_totals_match_reading_every_link(private_database: Database, start: datetime) -> None:
    rng = random.Random(20261122)
    customer_id = new_customer_id()
    await make_links(private_database, customer_id, rng, start)
    async with private_database.session() as session:
        unfolded = await session.scalar(
            select(func.count())
            .select_from(LinkDayChange)
            .where(LinkDayChange.customer_id == customer_id)
        )
        refunds = Counter(
            await session.scalars(select(Refund.status).where(Refund.customer_id == customer_id))
        )
        statuses = Counter(
            await session.scalars(
                select(PaymentLink.status).where(PaymentLink.customer_id == customer_id)
            )
        )
    assert unfolded  # some changes are still unfolded: readers must add them
    # Every kind of link and refund is there to be counted.
    assert all(refunds[status] for status in ("PENDING", "SUCCEEDED", "FAILED")), refunds
    assert all(statuses[status] for status in ("CREATED", "PAID", "CANCELLED", "REFUNDED"))

    whole_days = 0
    for case in range(60):
        since = start + timedelta(minutes=rng.randrange(-3 * 1440, 26 * 1440))
        if rng.random() < 0.5:  # whole days too (UTC's and Brasília's), and less than a day
            since = since.replace(hour=rng.choice([0, 3]), minute=0)
        end = since + timedelta(minutes=rng.choice([0, 30, 1440 - 1, 1440, 5 * 1440, 40 * 1440]))
        end -= timedelta(milliseconds=1 if rng.random() < 0.5 else 0)
        now = start + timedelta(minutes=rng.randrange(-2 * 1440, 40 * 1440))
        filters = LinkFilters(
            start=since,
            end=end,
            status=rng.choice([None, None, "CREATED", "PAID", "EXPIRED", "CANCELLED", "REFUNDED"]),
            payment_method=rng.choice([None, None, None, METHOD_CARD, METHOD_PIX]),
        )
        expected = await truth(private_database, customer_id, filters, now)
        assert await read_back(private_database, customer_id, filters, now) == expected, (
            case,
            filters,
            now,
        )
        shape, _ = matching.shape_and_values(
            private_database.dialect == "postgresql", customer_id, filters, now, ()
        )
        whole_days += shape.whole_days
    assert whole_days >= 10  # many of the cases read whole days from the totals

    # Folding everything changes nothing a reader sees, nor does counting again from the links.
    filters = LinkFilters(start=start - timedelta(days=1), end=start + timedelta(days=30))
    now = start + timedelta(days=6, hours=5)
    expected = await truth(private_database, customer_id, filters, now)
    assert sum(v for (_, _, m), v in expected[0].items() if m >= 0) == 70
    await fold_all(private_database)
    assert await read_back(private_database, customer_id, filters, now) == expected
    async with private_database.session() as session:
        await DayTotalRepository(session).rebuild()
        await session.commit()
    assert await read_back(private_database, customer_id, filters, now) == expected


async def tally_of(
    database: Database, customer_id: int, filters: LinkFilters, now: datetime
) -> list[tuple[object, str, int, int]]:
    async with database.read_session() as session:
        rows = await ListingRepository(session).tally(
            customer_id=customer_id, filters=filters, now=now
        )
    return sorted((row.day, row.status, row.method, row.links) for row in rows if row.links)


async def fold_all(database: Database) -> None:
    async with database.session() as session:
        while await DayTotalRepository(session).fold():
            pass
        await session.commit()


async def test_a_link_is_counted_on_its_creation_day_in_brasilia(
    private_database: Database,
) -> None:
    # 23:30 on 31 December 2026 in Brasília is 02:30 on 1 January 2027 in UTC: the sale is
    # December's (and 2026's), whether read from the totals or link by link.
    customer_id = new_customer_id()
    await create_at(private_database, customer_id, datetime(2027, 1, 1, 2, 30, tzinfo=UTC), days=3)
    now = datetime(2027, 1, 1, 12, tzinfo=UTC)
    whole = LinkFilters(start=START, end=datetime(2027, 2, 1, tzinfo=UTC))
    part = LinkFilters(start=datetime(2027, 1, 1, tzinfo=UTC), end=now)  # less than a day
    expected = [(date(2026, 12, 31), "CREATED", 0, 1)]
    for _ in ("changes", "folded"):
        assert await tally_of(private_database, customer_id, whole, now) == expected
        assert await tally_of(private_database, customer_id, part, now) == expected
        await fold_all(private_database)
    async with private_database.session() as session:
        await DayTotalRepository(session).rebuild()
        await session.commit()
    assert await tally_of(private_database, customer_id, whole, now) == expected


async def test_a_link_due_an_hour_into_the_next_day_by_summer_time_is_still_open(
    private_database: Database,
) -> None:
    # Created at 23:30 on 3 November 2018 in Brasília for 1 day; summer time began at midnight
    # on the 4th, so it is due 24 hours later at 00:30 on the 5th, a day later than its group.
    customer_id = new_customer_id()
    await create_at(private_database, customer_id, datetime(2018, 11, 4, 2, 30, tzinfo=UTC), days=1)
    filters = LinkFilters(start=DST_BEGAN, end=DST_BEGAN + timedelta(days=30))
    day = date(2018, 11, 3)
    for _ in ("changes", "folded"):
        for now, status in (
            (datetime(2018, 11, 5, 2, 10, tzinfo=UTC), "CREATED"),  # 00:10 on the 5th
            (datetime(2018, 11, 5, 2, 30, tzinfo=UTC), "EXPIRED"),
        ):
            assert await tally_of(private_database, customer_id, filters, now) == [
                (day, status, 0, 1)
            ], now
        await fold_all(private_database)
