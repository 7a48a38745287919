"""Payment links: creating one idempotently, reading, listing and reporting, and paying one (card,
Pix, the sandbox's automatic payment), which publishes its PAYMENT_LINK_INBOUND in the same
transaction."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.pix import SANDBOX_ISPB, new_br_code_txid, new_end_to_end_id
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import BadRequest, Conflict, ErrorCode, NotFound
from tucano.core.money import from_cents, to_cents
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.events.payloads import PaymentLinkInbound
from tucano.events.types import EventType
from tucano.payment_links.domain import (
    METHOD_CARD,
    METHOD_NAMES,
    METHOD_PIX,
    STATUS_NAMES,
    PaymentMethod,
    expiration_of,
    most_installments,
    split_into_installments,
    status_at,
)
from tucano.payment_links.filters import LinkFilters
from tucano.payment_links.listing_repository import ListingRepository
from tucano.payment_links.models import Payment, PaymentLink, Refund
from tucano.payment_links.refunds_repository import RefundRepository
from tucano.payment_links.repository import PaymentLinkRepository
from tucano.payment_links.schemas import PaymentLinkCreate, PaymentView
from tucano.payment_links.totals_repository import DayTotalRepository


def request_fingerprint(data: PaymentLinkCreate) -> str:
    """The same request, whatever its spelling (10.5 or 10.50, punctuation in the document)."""
    canonical = json_codec.dumps(data.model_dump(mode="python", by_alias=True))
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class IdempotencyRef:
    """An x-transaction-id of a customer, and the fingerprint of the request it came with."""

    customer_id: int
    key: uuid.UUID
    fingerprint: str


def new_link(
    *, customer_id: int, data: PaymentLinkCreate, autopay_delay: timedelta | None
) -> PaymentLink:
    """A new CREATED link, not stored yet. `autopay_delay` (sandbox only) schedules the
    automatic Pix payment of a link whose amount ends in 01 cents."""
    now = clock.now()
    cents = to_cents(data.amount)
    return PaymentLink(
        uuid=uuid.uuid4(),
        customer_id=customer_id,
        payer_name=data.payer_name,
        registration_number=data.registration_number,
        amount_cents=cents,
        numbers_installments=data.numbers_installments,
        description=data.description,
        user_reference=data.user_reference,
        expiration_days=data.expiration_days,
        verification_token=100_000 + secrets.randbelow(900_000),
        status="CREATED",
        created_at=now,
        expires_at=expiration_of(now, data.expiration_days),
        autopay_at=now + autopay_delay if autopay_delay is not None and cents % 100 == 1 else None,
        pix_txid=new_br_code_txid(),
        refunded_cents=0,
        refund_count=0,
    )


async def create_link(
    database: Database, *, ref: IdempotencyRef, link: PaymentLink, response: bytes
) -> bytes:
    """Store `link` with `response` as the answer to its x-transaction-id, and return the
    answer to send: `response`, or, when the x-transaction-id was used in the last 24 hours,
    the answer it had then (409 if that was for a different request). One link per key, even
    when requests with the same key race (the loser's transaction is undone)."""
    return await PaymentLinkRepository.create_and_commit(database, ref, link=link, answer=response)


def payment_view_of(row: Any) -> PaymentView | None:
    """The payment in a row read with its link (listing_repository.LINK_WITH_PAYMENT); None
    while the link is unpaid."""
    if row.payment_id is None:
        return None
    return PaymentView(
        row.method,
        row.payment_id,
        row.payment_receipt,
        row.paid_at,
        row.installments,
        row.payment_amount_cents,
    )


async def read_link(
    database: Database, *, customer_id: int, link_uuid: uuid.UUID
) -> tuple[Any, PaymentView | None, list[Refund]]:
    """The customer's link, its payment and its refunds, for display (a row with the link's
    column names); another customer's link is answered as missing. Writers use `get_link`."""
    row = await PaymentLinkRepository.read_for_display(
        database, customer_id=customer_id, link_uuid=link_uuid
    )
    if row is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    refunds: list[Refund] = []
    if row.refund_count:
        async with database.read_session() as session:
            refunds = (await RefundRepository(session).of_links([row.id]))[row.id]
    return row, payment_view_of(row), refunds


async def refunds_shown(session: AsyncSession, rows: Sequence[Any]) -> dict[int, list[Refund]]:
    """The refunds of the links among `rows` that have any (most have none: not asked)."""
    ids = [row.id for row in rows if row.refund_count]
    return await RefundRepository(session).of_links(ids) if ids else {}


async def get_link(
    session: AsyncSession, *, customer_id: int, link_uuid: uuid.UUID
) -> tuple[PaymentLink, Payment | None]:
    """The customer's link and its payment, as ORM objects for a change in `session`."""
    found = await PaymentLinkRepository(session).get(customer_id=customer_id, link_uuid=link_uuid)
    if found is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    return found


async def list_links(
    session: AsyncSession,
    *,
    customer_id: int,
    filters: LinkFilters,
    sort: Sequence[str],
    page: PageRequest,
) -> tuple[list[tuple[Any, PaymentView | None]], int]:
    """One page of the customer's matched links with their payments, and how many match."""
    rows, total = await ListingRepository(session).page_of(
        customer_id=customer_id,
        filters=filters,
        sort=sort,
        now=clock.now(),
        offset=page.offset,
        limit=page.size,
    )
    return [(row, payment_view_of(row)) for row in rows], total


async def report(
    session: AsyncSession, *, customer_id: int, filters: LinkFilters
) -> dict[str, Any]:
    """Counts and sums over every matched link, by status, method and day."""
    by_status: dict[str, list[int]] = {name: [0, 0, 0] for name in STATUS_NAMES}
    by_method: dict[int, list[int]] = {METHOD_CARD: [0, 0, 0], METHOD_PIX: [0, 0, 0]}
    by_day: dict[date, list[int]] = {}
    tallies = await ListingRepository(session).tally(
        customer_id=customer_id, filters=filters, now=clock.now()
    )
    for row in tallies:
        sums = [by_status[row.status]]
        if row.method in by_method:
            sums.append(by_method[row.method])
        if row.day is not None:
            sums.append(by_day.setdefault(row.day, [0, 0, 0]))
        for counted in sums:
            counted[0] += row.links
            counted[1] += row.cents
            counted[2] += row.refunded_cents
    return {
        "start_date": filters.start,
        "end_date": filters.end,
        "total_count": sum(sums[0] for sums in by_status.values()),
        "total_amount": from_cents(sum(sums[1] for sums in by_status.values())),
        "refunded_amount": from_cents(sum(sums[2] for sums in by_status.values())),
        "by_status": [
            {
                "status": name,
                "count": count,
                "amount": from_cents(cents),
                "refunded_amount": from_cents(refunded_cents),
            }
            for name, (count, cents, refunded_cents) in by_status.items()
        ],
        "by_payment_method": [
            {
                "payment_method": method,
                "count": count,
                "amount": from_cents(cents),
                "refunded_amount": from_cents(refunded_cents),
            }
            for method, (count, cents, refunded_cents) in by_method.items()
        ],
        "by_day": [
            {"date": day.isoformat(), "count": count, "amount": from_cents(cents)}
            for day, (count, cents, _) in sorted(by_day.items())
        ],
    }


async def pay_link(
    session: AsyncSession,
    *,
    link: PaymentLink,
    method: int,
    installments: int = 1,
    receipt: str | None = None,
) -> Payment:
    """Record the payment of a link and publish its PAYMENT_LINK_INBOUND, in the caller's
    transaction. Refused (409) unless the link is CREATED and not expired; for a card, the
    instalments must be among those offered and their amounts add up to the link's exactly."""
    now = clock.now()
    if method not in (METHOD_CARD, METHOD_PIX):
        raise BadRequest("paymentMethod must be 1 (credit card) or 2 (PIX)")
    most = most_installments(link.amount_cents, link.numbers_installments)
    if method == METHOD_PIX:
        installments = 1
    elif not 1 <= installments <= most:
        raise BadRequest(f"installments must be between 1 and {most} for this link")
    links = PaymentLinkRepository(session)
    if not await links.mark_paid(link.id, now=now):
        await links.refresh(link)
        raise Conflict(
            ErrorCode.PAYMENT_LINK_NOT_PAYABLE,
            f"the payment link is {status_at(link, now)}, not CREATED",
        )
    link.status = "PAID"
    link.autopay_at = None
    if receipt is None:
        receipt = (
            new_end_to_end_id(ispb=SANDBOX_ISPB, at=now)
            if method == METHOD_PIX
            else f"{secrets.randbelow(10**9):09d}"
        )
    payment = await links.add_payment(
        Payment(
            link_id=link.id,
            customer_id=link.customer_id,
            method=method,
            payment_id="pay_" + uuid.uuid4().hex[:24],
            payment_receipt=receipt,
            installments=installments,
            amount_cents=link.amount_cents,
            installment_cents=(
                ",".join(str(c) for c in split_into_installments(link.amount_cents, installments))
                if method == METHOD_CARD
                else None
            ),
            paid_at=now,
        )
    )
    await DayTotalRepository(session).record_paid(link, method=method)
    await deliveries.publish_event(
        session,
        customer_id=link.customer_id,
        event_type=EventType.PAYMENT_LINK_INBOUND,
        payload=PaymentLinkInbound(
            payment_link_uuid=str(link.uuid),
            payment_date=now,
            payment_method=METHOD_NAMES[PaymentMethod(method)],
            payment_id=payment.payment_id,
            payment_receipt=receipt,
            amount=from_cents(link.amount_cents),
            user_reference=link.user_reference,
            numbers_installments=installments if method == METHOD_CARD else None,
            status="PAID",
        ),
    )
    return payment


async def find_link_by_txid(
    session: AsyncSession, *, customer_id: int, txid: str
) -> PaymentLink | None:
    """The customer's link whose BR Code carries `txid`, locked until commit (it is paid next)."""
    return await PaymentLinkRepository(session).find_by_txid_for_update(
        customer_id=customer_id, txid=txid
    )


async def find_link_for_checkout(
    session: AsyncSession, link_uuid: uuid.UUID
) -> tuple[PaymentLink, Payment | None] | None:
    """A link and its payment by UUID alone, for the checkout (whose token names it)."""
    return await PaymentLinkRepository(session).find_for_checkout(link_uuid)


async def lock_link(session: AsyncSession, link_id: int) -> PaymentLink:
    """A link, locked against other payments until commit."""
    link = await PaymentLinkRepository(session).get_for_update(link_id)
    assert link is not None  # links are never deleted
    return link


async def run_due_autopayments(session: AsyncSession, *, limit: int = 100) -> int:
    """Sandbox: pay by Pix every link whose automatic payment is due. Durable: the due time is
    a column, so a link created just before a stop is paid once the service runs again."""
    now = clock.now()
    paid = 0
    for link in await PaymentLinkRepository(session).due_autopayments(now=now, limit=limit):
        if link.status == "CREATED" and now < link.expires_at:
            await pay_link(session, link=link, method=METHOD_PIX)
            paid += 1
        else:
            link.autopay_at = None
    await session.flush()
    return paid


async def fold_day_totals(session: AsyncSession) -> int:
    """Fold a batch of the day totals' changes (a periodic job)."""
    return await DayTotalRepository(session).fold()


async def prune_creation_keys(
    session: AsyncSession, *, now: datetime, batch_size: int = 5000
) -> int:
    """Delete one batch of x-transaction-ids older than their window (a periodic job)."""
    return await PaymentLinkRepository(session).prune_creation_keys(now=now, batch_size=batch_size)
