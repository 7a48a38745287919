"""A payment link's life besides its payment: its cancellation, the announcement of its expiry,
and the records of its refunds (asked for, then SUCCEEDED or FAILED). Each change of a link's
state publishes its PAYMENT_LINK_INBOUND in the transaction that makes it. Who gives the money
back (the card processor, the Pix provider) is the refunds feature's business, above this one."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import BadRequest, Conflict, ErrorCode, NotFound
from tucano.core.money import from_cents
from tucano.deliveries import service as deliveries
from tucano.events.payloads import LinkEventStatus, LinkRefund, PaymentLinkInbound
from tucano.events.types import EventType
from tucano.payment_links.domain import (
    METHOD_CARD,
    METHOD_NAMES,
    PaymentMethod,
    refund_state,
    status_after_refunds,
    status_at,
)
from tucano.payment_links.models import Payment, PaymentLink, Refund
from tucano.payment_links.refunds_repository import FAILED, PENDING, SUCCEEDED, RefundRepository
from tucano.payment_links.repository import PaymentLinkRepository
from tucano.payment_links.totals_repository import UNPAID, DayTotalRepository

# Expired links announced per run of the job (it runs again at once while there are more).
ANNOUNCE_BATCH = 500


def link_event(
    link: PaymentLink,
    payment: Payment | None,
    *,
    status: LinkEventStatus,
    at: datetime | None,
    refund: Refund | None = None,
) -> PaymentLinkInbound:
    """The PAYMENT_LINK_INBOUND of a change of `link` to `status`, at `at`."""
    fields: dict[str, object] = {}
    if payment is not None:
        fields = {
            "payment_date": payment.paid_at,
            "payment_method": METHOD_NAMES[PaymentMethod(payment.method)],
            "payment_id": payment.payment_id,
            "payment_receipt": payment.payment_receipt,
        }
        if payment.method == METHOD_CARD:
            fields["numbers_installments"] = payment.installments
    if refund is not None:
        fields["refunded_amount"] = from_cents(link.refunded_cents)
        fields["refund"] = LinkRefund(
            refund_id=str(refund.uuid),
            amount=from_cents(refund.amount_cents),
            status=refund.status,
            failure_reason=refund.failure_reason,
        )
    return PaymentLinkInbound(
        payment_link_uuid=str(link.uuid),
        amount=from_cents(link.amount_cents),
        user_reference=link.user_reference,
        status=status,
        status_date=at,
        **fields,
    )


async def cancel_link(
    session: AsyncSession, *, customer_id: int, link_uuid: uuid.UUID
) -> tuple[PaymentLink, Payment | None]:
    """CREATED becomes CANCELLED, with its event, in the caller's transaction; any other
    status is a 409 that names it."""
    links = PaymentLinkRepository(session)
    found = await links.get(customer_id=customer_id, link_uuid=link_uuid, for_update=True)
    if found is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    link, payment = found
    now = clock.now()
    if not await links.mark_cancelled(link.id, now=now):
        await links.refresh(link)
        raise Conflict(
            ErrorCode.PAYMENT_LINK_NOT_CANCELLABLE,
            f"the payment link is {status_at(link, now)}; only a CREATED link can be cancelled",
        )
    await links.refresh(link)
    await DayTotalRepository(session).record_cancelled(link)
    await deliveries.publish_event(
        session,
        customer_id=link.customer_id,
        event_type=EventType.PAYMENT_LINK_INBOUND,
        payload=link_event(link, payment, status="CANCELLED", at=now),
    )
    return link, payment


async def announce_expired_links(session: AsyncSession, *, limit: int = ANNOUNCE_BATCH) -> int:
    """Publish EXPIRED for each link whose expiry has passed unannounced (a periodic job: once
    per link, whichever process takes it, also for links that expired while none ran)."""
    now = clock.now()
    links = await PaymentLinkRepository(session).expired_unannounced(now=now, limit=limit)
    for link in links:
        link.expiry_announced_at = now
        await deliveries.publish_event(
            session,
            customer_id=link.customer_id,
            event_type=EventType.PAYMENT_LINK_INBOUND,
            payload=link_event(link, None, status="EXPIRED", at=link.expires_at),
        )
    await session.flush()
    return len(links)


# --- refunds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefundRequest:
    """A merchant's refund of a link: its x-transaction-id and what it asked for."""

    customer_id: int
    link_uuid: uuid.UUID
    key: uuid.UUID
    amount_cents: int | None  # None: what is left
    reason: str | None

    @property
    def fingerprint(self) -> str:
        canonical = json_codec.dumps([str(self.link_uuid), self.amount_cents, self.reason])
        return hashlib.sha256(canonical).hexdigest()


def refund_key_conflict() -> Conflict:
    return Conflict(
        ErrorCode.REFUND_IDEMPOTENCY_CONFLICT,
        "this x-transaction-id asked for a refund with a different body or of another payment "
        "link; send a new UUID for a new refund",
    )


async def find_refund_replay(session: AsyncSession, request: RefundRequest) -> Refund | None:
    """The refund this x-transaction-id asked for before, if any (409 if with another body)."""
    refund = await RefundRepository(session).by_key(
        customer_id=request.customer_id, key=request.key
    )
    if refund is not None and refund.request_hash != request.fingerprint:
        raise refund_key_conflict()
    return refund


async def lock_link(
    session: AsyncSession, *, customer_id: int, link_uuid: uuid.UUID
) -> tuple[PaymentLink, Payment | None]:
    """The customer's link and its payment, the link locked until commit (refunds of one link
    are asked for one at a time); 404 for another customer's."""
    found = await PaymentLinkRepository(session).get(
        customer_id=customer_id, link_uuid=link_uuid, for_update=True
    )
    if found is None:
        raise NotFound(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    return found


def paid_payment(link: PaymentLink, payment: Payment | None) -> Payment:
    """The payment of a link that can be refunded (PAID, refunded in part included); 409
    otherwise."""
    status = status_at(link, clock.now())
    if status != "PAID" or payment is None:
        raise not_refundable(f"the payment link is {status}; only a PAID link can be refunded")
    return payment


def not_refundable(reason: str) -> Conflict:
    return Conflict(ErrorCode.PAYMENT_LINK_NOT_REFUNDABLE, reason)


async def open_refund(
    session: AsyncSession,
    *,
    link: PaymentLink,
    payment: Payment,
    request: RefundRequest,
    first_attempt_at: datetime,
) -> Refund:
    """A PENDING refund of the locked, PAID `link`, never more than is left: the link's lock
    orders refunds of one link, so two at once cannot both take the last of it."""
    refunds = RefundRepository(session)
    left = payment.amount_cents - await refunds.committed_cents(link.id)
    if left <= 0:
        raise not_refundable("the refunds already asked for leave nothing to refund")
    amount = left if request.amount_cents is None else request.amount_cents
    if amount > left:
        raise BadRequest(
            f"amount must be at most {from_cents(left)}, what is left to refund of this payment"
        )
    now = clock.now()
    return await refunds.add(
        Refund(
            uuid=uuid.uuid4(),
            link_id=link.id,
            customer_id=link.customer_id,
            method=payment.method,
            amount_cents=amount,
            reason=request.reason,
            status=PENDING,
            created_at=now,
            next_attempt_at=first_attempt_at,
            attempts=0,
            idempotency_key=request.key,
            request_hash=request.fingerprint,
        )
    )


async def finish_refund(
    session: AsyncSession,
    refund_id: int,
    *,
    succeeded: bool,
    failure_reason: str | None = None,
    devolution_id: str | None = None,
) -> tuple[Refund, PaymentLink, Payment] | None:
    """Give a PENDING refund its final state, with the link's event (REFUNDED in full,
    PARTIALLY_REFUNDED in part, or the link's status with the refund FAILED); None when it was
    final already (a webhook and a check may both report it)."""
    refunds = RefundRepository(session)
    refund = await refunds.get_for_update(refund_id)
    if refund is None or refund.status != PENDING:
        return None
    links = PaymentLinkRepository(session)
    link = await links.get_for_update(refund.link_id)
    payment = await links.payment_of(refund.link_id)
    assert link is not None and payment is not None  # a refund is of a paid link
    now = clock.now()
    refund.completed_at, refund.next_attempt_at = now, None
    if devolution_id is not None:
        refund.devolution_id = devolution_id
    if not succeeded:
        refund.status, refund.failure_reason = FAILED, (failure_reason or "refused")[:300]
        await session.flush()
        state = refund_state(amount_cents=link.amount_cents, refunded_cents=link.refunded_cents)
    else:
        refund.status = SUCCEEDED
        await refunds.add_refunded(link.id, refund.amount_cents)
        await session.flush()
        await links.refresh(link)
        state = refund_state(amount_cents=link.amount_cents, refunded_cents=link.refunded_cents)
        after = status_after_refunds(
            amount_cents=link.amount_cents, refunded_cents=link.refunded_cents
        )
        if after != link.status:
            link.status = after
            await DayTotalRepository(session).record_moved(
                link, method=payment.method or UNPAID, before="PAID", after=after
            )
    await deliveries.publish_event(
        session,
        customer_id=link.customer_id,
        event_type=EventType.PAYMENT_LINK_INBOUND,
        payload=link_event(link, payment, status=state, at=now, refund=refund),  # type: ignore[arg-type]
    )
    return refund, link, payment


async def postpone_refund(
    session: AsyncSession, refund_id: int, *, until: datetime, error: str | None
) -> None:
    """A PENDING refund is asked for (or about) again at `until`."""
    refund = await RefundRepository(session).get_for_update(refund_id)
    if refund is None or refund.status != PENDING:
        return
    refund.attempts += 1
    refund.next_attempt_at = until
    if error is not None:
        refund.last_error = error[:300]


async def keep_refund_answer(session: AsyncSession, refund_id: int, answer: bytes) -> None:
    """Remember the first answer sent for a refund, replayed for its x-transaction-id."""
    refund = await RefundRepository(session).get_for_update(refund_id)
    if refund is not None and refund.answer is None:
        refund.answer = answer.decode()


async def refunds_of(session: AsyncSession, link_ids: list[int]) -> dict[int, list[Refund]]:
    return await RefundRepository(session).of_links(link_ids)


async def get_refund(session: AsyncSession, refund_id: int) -> Refund | None:
    return await RefundRepository(session).get_for_update(refund_id)


async def refund_with_payment(
    session: AsyncSession, refund_id: int
) -> tuple[Refund, Payment] | None:
    """A refund and the payment it gives back (from)."""
    refund = await RefundRepository(session).get_for_update(refund_id)
    if refund is None:
        return None
    payment = await PaymentLinkRepository(session).payment_of(refund.link_id)
    assert payment is not None  # a refund is of a paid link
    return refund, payment


async def find_refund(session: AsyncSession, refund_uuid: uuid.UUID) -> Refund | None:
    return await RefundRepository(session).by_uuid(refund_uuid)


async def claim_due_refunds(session: AsyncSession, *, lease: timedelta, limit: int) -> list[int]:
    now = clock.now()
    return await RefundRepository(session).claim_due(now=now, lease_until=now + lease, limit=limit)
