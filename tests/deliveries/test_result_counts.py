"""The results list's totals, added up from hour counts: exact for every filter and date range,
before and after folding and pruning. Both databases."""

from __future__ import annotations

import itertools
import random
import secrets
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from tests.support.queue import add_webhook
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.deliveries import result_counts, result_repository
from tucano.deliveries import service as deliveries
from tucano.deliveries.models import DeliveryResult
from tucano.deliveries.queue import queue_for
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.deliveries.result_repository import ResultFilters
from tucano.events.samples import sample_payload
from tucano.events.types import EventType

START = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
TYPES = [EventType.PIX_OUTBOUND, EventType.CARD_CHARGEBACK]
STATUSES = ["SUCCESS", "EXHAUSTED", "FAILED"]
_ids = itertools.count(10_000_000)


def test_an_hour_is_counted_from_the_epoch() -> None:
    assert result_counts.hour_of(datetime(1970, 1, 1, 0, 59, 59, 999999, tzinfo=UTC)) == 0
    assert result_counts.hour_of(datetime(1970, 1, 1, 1, tzinfo=UTC)) == 1
    assert result_counts.hour_of(START) == int(START.timestamp()) // 3600 == 498_202
    rows = result_counts.count_rows(
        [(1, 2, "PIX_OUTBOUND", "SUCCESS", START)] * 2 + [(1, 2, "PIX_OUTBOUND", "FAILED", START)],
        sign=-1,
    )
    assert sorted(r["result_count"] for r in rows) == [-2, -1]


def outcome(
    customer_id: int, webhook_id: int, event_type: str, status: str, at: datetime
) -> Outcome:
    claimed = ClaimedDelivery(
        delivery_id=next(_ids),
        claim_token="t",
        event_id="evt_" + secrets.token_hex(8),
        event_type=event_type,
        customer_id=customer_id,
        webhook_id=webhook_id,
        attempt=1,
        payload=b"{}",
        target_url=None,
        webhook_active=False,
        subscribed_to=None,
        signing_secrets=(),
        lease_until=at,
        event_created_at=at,
    )
    return Outcome(claimed, status, "https://example.com/h", 200, "ok", None, 5, at, None)


async def exact_count(database: Database, customer_id: int, filters: ResultFilters) -> int:
    conditions = [DeliveryResult.customer_id == customer_id]
    if filters.event_type is not None:
        conditions.append(DeliveryResult.event_type == filters.event_type.value)
    if filters.webhook_id is not None:
        conditions.append(DeliveryResult.webhook_id == filters.webhook_id)
    if filters.status is not None:
        conditions.append(DeliveryResult.status == filters.status)
    if filters.start is not None:
        conditions.append(DeliveryResult.attempted_at >= filters.start)
    if filters.end is not None:
        conditions.append(DeliveryResult.attempted_at <= filters.end)
    async with database.session() as session:
        return int(
            await session.scalar(
                select(func.count()).select_from(DeliveryResult).where(*conditions)
            )
            or 0
        )


def some_filters(rng: random.Random) -> list[ResultFilters]:
    """Ranges on hour boundaries, a microsecond either side, inside one hour, open-ended."""
    moments = [
        START + timedelta(hours=h, microseconds=d) for h in range(-1, 8) for d in (-1, 0, 1)
    ] + [START + timedelta(seconds=rng.uniform(0, 7 * 3600)) for _ in range(8)]
    chosen = []
    for _ in range(60):
        start, end = sorted(rng.sample(moments, 2))
        chosen.append(
            ResultFilters(
                event_type=rng.choice([None, *TYPES]),
                webhook_id=rng.choice([None, 1, 2]),
                status=rng.choice([None, *STATUSES]),
                start=rng.choice([None, start]),
                end=rng.choice([None, end]),
            )
        )
    chosen += [ResultFilters(start=START, end=START + timedelta(minutes=20)), ResultFilters()]
    return chosen


async def assert_totals_exact(
    database: Database, customer_id: int, filters: list[ResultFilters]
) -> None:
    for one in filters:
        async with database.session() as session:
            _, total = await deliveries.list_results(
                session, customer_id=customer_id, filters=one, page=PageRequest(0, 20)
            )
        assert total == await exact_count(database, customer_id, one), one


async def rows_and_keys(database: Database, customer_id: int) -> tuple[int, int, int]:
    """The customer's count rows, its distinct keys, and its rows not folded yet."""
    counts = result_repository.COUNTS.c
    keys = [counts[name] for name in result_counts.KEY]
    mine = counts.customer_id == customer_id
    async with database.session() as session:
        rows = await session.scalar(select(func.count()).where(mine))
        distinct = await session.scalar(
            select(func.count()).select_from(select(*keys).where(mine).distinct().subquery())
        )
        unfolded = await session.scalar(select(func.count()).where(mine, ~counts.folded))
    return int(rows or 0), int(distinct or 0), int(unfolded or 0)


async def test_totals_add_up_exactly_before_and_after_folding_and_pruning(
    database: Database,
) -> None:
    rng = random.Random(7)
    customer_id = rng.randrange(10**9, 10**10)
    other_customer = customer_id + 1
    moments = [START + timedelta(seconds=rng.uniform(0, 7 * 3600)) for _ in range(300)]
    moments += [START + timedelta(hours=h, microseconds=d) for h in range(7) for d in (-1, 0, 1)]
    outcomes = [
        outcome(customer_id, rng.choice([1, 2]), rng.choice(TYPES).value, rng.choice(STATUSES), m)
        for m in moments
    ]
    outcomes.append(outcome(other_customer, 1, TYPES[0].value, "SUCCESS", START))
    for first in range(0, len(outcomes), 37):
        await queue_for(database).record(outcomes[first : first + 37])
    filters = some_filters(rng)

    await assert_totals_exact(database, customer_id, filters)
    rows, keys, _ = await rows_and_keys(database, customer_id)
    assert rows >= keys  # (a running service's own fold job may have folded some already)
    async with database.session() as session:
        while await deliveries.fold_result_counts(session):
            pass
        await session.commit()
    assert await rows_and_keys(database, customer_id) == (keys, keys, 0)  # one row per key
    await assert_totals_exact(database, customer_id, filters)

    # Pruning takes the first three and a half hours away, from the counts too.
    async with database.session() as session:
        while await deliveries.prune_history(
            session, older_than=START + timedelta(hours=3, minutes=30), batch_size=50
        ):
            pass
        await session.commit()
    await assert_totals_exact(database, customer_id, filters)
    async with database.session() as session:
        while await deliveries.fold_result_counts(session):
            pass
        await session.commit()
    await assert_totals_exact(database, customer_id, filters)

    # The other customer's result counts for it alone (then it is pruned with the rest).
    assert await exact_count(database, other_customer, ResultFilters()) == 0


async def test_a_result_at_a_whole_second_is_inside_a_range_that_starts_or_ends_there(
    database: Database,
) -> None:
    """SQLite compares timestamps as text: the worker's own writes and the list's filters must
    write a whole second alike (".000000" included)."""
    customer_id = random.randrange(10**9, 10**10)
    at = START + timedelta(days=3, hours=5)
    await queue_for(database).record([outcome(customer_id, 1, "PIX_OUTBOUND", "SUCCESS", at)])
    for filters in (
        ResultFilters(start=at),
        ResultFilters(end=at),
        ResultFilters(start=at, end=at),
    ):
        async with database.session() as session:
            rows, total = await deliveries.list_results(
                session, customer_id=customer_id, filters=filters, page=PageRequest(0, 20)
            )
        assert total == len(rows) == 1, filters


async def test_ranges_in_the_last_hour_of_year_9999_count_its_results(
    database: Database,
) -> None:
    """The hour after 9999-12-31T23:00Z is no datetime: a range starting inside that hour
    counts its rows, never overflowing."""
    customer_id = random.randrange(10**9, 10**10)
    last = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    moments = [last - timedelta(minutes=30), last, START]
    await queue_for(database).record(
        [outcome(customer_id, 1, "PIX_OUTBOUND", "SUCCESS", at) for at in moments]
    )
    cases = [
        (ResultFilters(start=last), 1),
        (ResultFilters(start=last - timedelta(minutes=45)), 2),
        (ResultFilters(start=last - timedelta(minutes=45), end=last - timedelta(minutes=1)), 1),
        (ResultFilters(start=START, end=datetime.max.replace(tzinfo=UTC)), 3),
        (ResultFilters(end=datetime.max.replace(tzinfo=UTC)), 3),
        (ResultFilters(end=last - timedelta(hours=1)), 1),
    ]
    for filters, expected in cases:
        async with database.session() as session:
            rows, total = await deliveries.list_results(
                session, customer_id=customer_id, filters=filters, page=PageRequest(0, 20)
            )
        assert total == len(rows) == expected, filters


async def test_every_page_carries_the_total_near_and_far(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Near pages read page and total in one statement; far ones (past DEEP_OFFSET, lowered
    here) count first. Either way the pages hold the results newest first, and a page past the
    end is empty with the total."""
    customer_id = random.randrange(10**9, 10**10)
    moments = [START + timedelta(minutes=7 * i) for i in range(9)]
    await queue_for(database).record(
        [outcome(customer_id, 1, "PIX_OUTBOUND", "SUCCESS", at) for at in moments]
    )
    newest_first = sorted(moments, reverse=True)
    for deep in (10_000, 3):
        monkeypatch.setattr(result_repository, "DEEP_OFFSET", deep)
        for number in range(5):
            async with database.session() as session:
                rows, total = await deliveries.list_results(
                    session,
                    customer_id=customer_id,
                    filters=ResultFilters(),
                    page=PageRequest(number, 2),
                )
            assert total == 9, (deep, number)
            assert [r.attempted_at for r in rows] == newest_first[2 * number : 2 * number + 2]
        async with database.session() as session:
            rows, total = await deliveries.list_results(
                session, customer_id=customer_id, filters=ResultFilters(), page=PageRequest(7, 2)
            )
        assert (rows, total) == ([], 9)


async def test_deliveries_cancelled_with_their_webhook_are_counted(
    private_database: Database,
) -> None:
    """A webhook deleted or deactivated with deliveries queued records them as FAILED: the
    totals count those results too. (A database of its own: no running worker claims them.)"""
    database = private_database
    customer_id = random.randrange(10**9, 10**10)
    webhook_id = await add_webhook(database, customer_id)
    async with database.session() as session:
        await deliveries.publish_events(
            session,
            [
                deliveries.NewEvent(
                    customer_id, EventType.PIX_OUTBOUND, sample_payload(EventType.PIX_OUTBOUND)
                )
                for _ in range(3)
            ],
        )
        await session.commit()
        cancelled = await deliveries.delete_webhook(
            session, customer_id=customer_id, webhook_id=webhook_id
        )
        await session.commit()
    assert cancelled == 3
    for filters in (
        ResultFilters(),
        ResultFilters(status="FAILED"),
        ResultFilters(webhook_id=webhook_id),
    ):
        async with database.session() as session:
            rows, total = await deliveries.list_results(
                session, customer_id=customer_id, filters=filters, page=PageRequest(0, 20)
            )
        assert total == len(rows) == 3 == await exact_count(database, customer_id, filters)
