"""Paying a payment link (card, PIX, the sandbox's automatic payment), which publishes its
PAYMENT_LINK_INBOUND in the same transaction."""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.pix import SANDBOX_ISPB, new_end_to_end_id
from tucano.core.clock import clock
from tucano.core.errors import BadRequest, Conflict, ErrorCode
from tucano.core.money import from_cents
from tucano.deliveries import outbox
from tucano.events.payloads import PaymentLinkInbound
from tucano.events.types import EventType
from tucano.payment_links import totals
from tucano.payment_links.installments import split_into_installments
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.schemas import (
    METHOD_CARD,
    METHOD_NAMES,
    METHOD_PIX,
    PaymentMethod,
    status_at,
)


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
    if method == METHOD_PIX:
        installments = 1
    elif not 1 <= installments <= min(link.numbers_installments, link.amount_cents):
        # Offered (installmentsOptions) and at least a cent each: 0.02 is never charged in three.
        raise BadRequest(
            "installments must be between 1 and "
            f"{min(link.numbers_installments, link.amount_cents)} for this link"
        )
    # The guard and the change in one statement, so two payments can never both succeed.
    paid = await session.execute(
        update(PaymentLink)
        .where(
            PaymentLink.id == link.id,
            PaymentLink.status == "CREATED",
            PaymentLink.expires_at > now,
        )
        .values(status="PAID", autopay_at=None)
        .execution_options(synchronize_session=False)
    )
    if getattr(paid, "rowcount", 0) != 1:
        await session.refresh(link)
        current = status_at(link, now)
        raise Conflict(
            ErrorCode.PAYMENT_LINK_NOT_PAYABLE, f"the payment link is {current}, not CREATED"
        )
    link.status = "PAID"
    link.autopay_at = None
    if receipt is None:
        receipt = (
            new_end_to_end_id(ispb=SANDBOX_ISPB, at=now)
            if method == METHOD_PIX
            else f"{secrets.randbelow(10**9):09d}"
        )
    payment = Payment(
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
    session.add(payment)
    await session.flush()
    await totals.record_paid(session, link, method=method)
    await outbox.publish_event(
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


async def run_due_autopayments(session: AsyncSession, *, limit: int = 100) -> int:
    """Sandbox: pay by PIX every link whose automatic payment is due. Durable: the due time is
    a column, so a link created just before a stop is paid once the service runs again."""
    now = clock.now()
    due = (
        select(PaymentLink)
        .where(PaymentLink.autopay_at.is_not(None), PaymentLink.autopay_at <= now)
        .order_by(PaymentLink.autopay_at)
        .limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    links = list(await session.scalars(due))
    paid = 0
    for link in links:
        if link.status == "CREATED" and now < link.expires_at:
            await pay_link(session, link=link, method=METHOD_PIX)
            paid += 1
        else:
            link.autopay_at = None
    await session.flush()
    return paid
