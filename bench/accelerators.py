"""Benchmark: what each of PostgreSQL's accelerators saves over the plain path, in one run.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.accelerators

Every repository method that has an accelerator (db/postgres.py; docs/performance.md, "Where
PostgreSQL is tuned") runs in this process on a fresh PostgreSQL database twice: tuned, as the
service runs it, and on the plain path (the same repository with `tuned = False`: the
SQLAlchemy statements and sessions SQLite runs, on the same PostgreSQL). Each operation runs
`--rounds` times alternately, many at once as requests arrive; the table gives this process's
CPU time per operation (the medians) and how much the plain path costs beside the tuned one.
The PostgreSQL server's own CPU is not counted: it runs the same statements either way, but for
the plain path's extra round trips. The queue's claim and record are measured by
`bench.deliveries --databases postgresql,postgresql-plain`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal

from tests.support.databases import create_scratch_database, drop_scratch_database

from bench.api_data import load_links, today_links
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries.repository import DeliveryRepository, EventRow
from tucano.deliveries.worker.wakeup import NOTIFY_CHANNEL
from tucano.events.types import EventType
from tucano.migrations import upgrade
from tucano.payment_links.filters import LinkFilters
from tucano.payment_links.listing_repository import ListingRepository
from tucano.payment_links.repository import PaymentLinkRepository
from tucano.payment_links.schemas import PaymentLinkCreate
from tucano.payment_links.service import IdempotencyRef, new_link
from tucano.webhooks.models import Webhook
from tucano.webhooks.repository import WebhookRepository

CUSTOMER_ID = 4242
LINKS = 30_000


class PlainLinks(PaymentLinkRepository):
    tuned = False


class PlainListing(ListingRepository):
    tuned = False


class PlainWebhooks(WebhookRepository):
    tuned = False


class PlainDeliveries(DeliveryRepository):
    tuned = False


Operation = Callable[[bool, int], Awaitable[object]]  # (tuned, nth) -> anything


async def cpu_per_operation(operation: Operation, tuned: bool, count: int, at_once: int) -> float:
    """This process's CPU seconds per operation, `at_once` of them in flight."""

    async def one_after_another(first: int) -> None:
        for nth in range(first, count, at_once):
            await operation(tuned, nth)

    started = time.process_time()
    await asyncio.gather(*(one_after_another(first) for first in range(at_once)))
    return (time.process_time() - started) / count


async def add_webhooks(database: Database, count: int) -> None:
    now = clock.now()
    async with database.session() as session:
        for n in range(count):
            session.add(
                Webhook(
                    customer_id=CUSTOMER_ID,
                    partner_id=None,
                    target_url=f"https://receiver-{n}.example.com/hook",
                    event_type=EventType.PIX_OUTBOUND.value if n < 2 else "CARD_CHARGEBACK",
                    is_active=True,
                    secret="",
                    created_at=now,
                    updated_at=now,
                )
            )
        await session.commit()


def operations(database: Database, link_uuids: list[uuid.UUID]) -> dict[str, tuple[Operation, int]]:
    """Each accelerated operation by name, with how many run at once."""
    links = {True: PaymentLinkRepository, False: PlainLinks}
    listing = {True: ListingRepository, False: PlainListing}
    webhooks = {True: WebhookRepository, False: PlainWebhooks}
    deliveries = {True: DeliveryRepository, False: PlainDeliveries}
    body = PaymentLinkCreate.model_validate(
        {
            "payerName": "Maria da Silva",
            "registrationNumber": "52998224725",
            "amount": Decimal("150.25"),
            "numbersInstallments": 3,
            "expirationDays": 5,
            "userReference": "bench",
        }
    )
    today = datetime.now(UTC)
    filters = LinkFilters(start=today.replace(hour=0, minute=0, second=0, microsecond=0), end=today)

    async def read_link(tuned: bool, nth: int) -> object:
        return await links[tuned].read_for_display(
            database, customer_id=CUSTOMER_ID, link_uuid=link_uuids[nth % len(link_uuids)]
        )

    async def create_link(tuned: bool, nth: int) -> object:
        link = new_link(customer_id=CUSTOMER_ID, data=body, autopay_delay=None)
        ref = IdempotencyRef(CUSTOMER_ID, uuid.uuid4(), "fingerprint")
        return await links[tuned].create_and_commit(database, ref, link=link, answer=b"{}")

    async def list_webhooks(tuned: bool, nth: int) -> object:
        return await webhooks[tuned].page_of(
            database, customer_id=CUSTOMER_ID, event_type=None, offset=0, limit=20
        )

    async def list_links(tuned: bool, nth: int) -> object:
        async with database.read_session() as session:
            return await listing[tuned](session).page_of(
                customer_id=CUSTOMER_ID,
                filters=filters,
                sort=[],
                now=clock.now(),
                offset=20 * (nth % 50),
                limit=20,
            )

    async def publish(tuned: bool, nth: int) -> object:
        rows = [
            EventRow(f"evt_{uuid.uuid4().hex}", CUSTOMER_ID, "PIX_OUTBOUND", '{"amount":1.00}')
            for _ in range(100)
        ]
        return await deliveries[tuned].add_events_and_commit(
            database, rows, now=clock.now(), channel=NOTIFY_CHANNEL
        )

    return {
        "read a link (read_for_display)": (read_link, 32),
        "create a link (create_and_commit)": (create_link, 8),
        "list webhooks, 10 (page_of)": (list_webhooks, 32),
        "list links, a page of 20 over 30k (page_of)": (list_links, 8),
        "publish 100 events (add_events_and_commit)": (publish, 4),
    }


COUNTS = {"publish": 100, "list links": 400, "create": 1000}


def count_of(name: str, default: int) -> int:
    return next((count for key, count in COUNTS.items() if name.startswith(key)), default)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each, alternately")
    parser.add_argument("--operations", type=int, default=2000, help="reads per run")
    args = parser.parse_args()
    base_url = os.environ.get("TUCANO_BENCH_DATABASE_URL") or os.environ.get(
        "TUCANO_TEST_DATABASE_URL"
    )
    if not base_url:
        sys.exit("set TUCANO_BENCH_DATABASE_URL to a PostgreSQL database")
    url = await create_scratch_database(base_url, prefix="tucano_bench")
    try:
        await asyncio.to_thread(upgrade, url)
        rows = today_links(CUSTOMER_ID, LINKS, datetime.now(UTC))
        await load_links(url, rows)
        database = Database(url)
        await add_webhooks(database, 10)
        link_uuids = [row[0] for row in rows[:500]]
        results: dict[str, dict[bool, list[float]]] = {}
        for name, (operation, at_once) in operations(database, link_uuids).items():
            count = count_of(name.split(" (")[0], args.operations)
            await cpu_per_operation(operation, True, count // 4, at_once)  # warm both up
            await cpu_per_operation(operation, False, count // 4, at_once)
            for _ in range(args.rounds):
                for tuned in (True, False):
                    cpu = await cpu_per_operation(operation, tuned, count, at_once)
                    results.setdefault(name, {}).setdefault(tuned, []).append(cpu)
        await database.dispose()
    finally:
        await drop_scratch_database(base_url, url)
    print(
        f"\nPostgreSQL's accelerators against the plain path ({os.cpu_count()} CPUs; medians of "
        f"{args.rounds} runs; this process's CPU per operation)\n"
    )
    print(f"{'operation':<46} {'tuned us':>9} {'plain us':>9} {'plain/tuned':>12}")
    print("-" * 79)
    for name, by_path in results.items():
        tuned_us = statistics.median(by_path[True]) * 1e6
        plain_us = statistics.median(by_path[False]) * 1e6
        print(f"{name:<46} {tuned_us:>9.0f} {plain_us:>9.0f} {plain_us / tuned_us:>11.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
