"""Paying a link by card: an attempt is reserved, the processor asked outside any transaction,
and its answer recorded; an approval pays the link through the one payment service.

Refusals lock the link's card payment: the 5th refusal since the last lock ended locks it for
15 minutes (the form is not shown meanwhile, and a submission is not sent to the processor).
Attempts refused by the form itself (a number that fails Luhn, a past expiry) reach no processor
and do not count. One attempt per link is in flight at a time; one whose answer was never
recorded (a process stopped meanwhile) stops blocking after PENDING_FOR.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.checkout.card_processor import (
    Approved,
    CardAuthorization,
    CardProcessor,
    Refusal,
    Refused,
)
from tucano.checkout.cards import CardDetails
from tucano.checkout.models import CardAttempt
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.payment_links import payments as link_payments
from tucano.payment_links.installments import split_into_installments
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.schemas import METHOD_CARD, status_at

log = structlog.get_logger("tucano.checkout")

LOCK_AFTER_REFUSALS = 5
LOCK_FOR = timedelta(minutes=15)
PENDING_FOR = timedelta(minutes=2)
_NSU = re.compile(r"[0-9]{6,12}")  # an acquirer's NSU, as the payment's receipt
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class CardPaid:
    payment: Payment
    attempt: CardAttempt


@dataclass(frozen=True)
class CardRefused:
    reason: Refusal
    locked_until: datetime | None  # this refusal locked card payment of the link


@dataclass(frozen=True)
class CardLocked:
    until: datetime


@dataclass(frozen=True)
class CardInProgress:
    """Another card payment of this link is waiting for the processor's answer."""


@dataclass(frozen=True)
class LinkNotPayable:
    status: str  # PAID or EXPIRED


CardOutcome = CardPaid | CardRefused | CardLocked | CardInProgress | LinkNotPayable


async def card_lock(session: AsyncSession, *, link_id: int, now: datetime) -> datetime | None:
    """Until when card payment of the link is locked, if it is now."""
    until = await session.scalar(
        select(func.max(CardAttempt.locks_until)).where(CardAttempt.link_id == link_id)
    )
    return until if until is not None and until > now else None


async def approved_attempt(session: AsyncSession, *, link_id: int) -> CardAttempt | None:
    """The approved attempt that paid the link (for its receipt: brand and last four)."""
    return await session.scalar(
        select(CardAttempt)
        .where(CardAttempt.link_id == link_id, CardAttempt.status == "APPROVED")
        .order_by(CardAttempt.id.desc())
        .limit(1)
    )


async def _lock_link(session: AsyncSession, link_id: int) -> PaymentLink:
    """The link, locked against other payments until commit (SQLite's write lock does that)."""
    link = await session.get(PaymentLink, link_id, with_for_update=True, populate_existing=True)
    assert link is not None  # links are never deleted
    return link


@dataclass(frozen=True)
class Reserved:
    attempt_id: int
    amount_cents: int


async def _reserve(
    database: Database, *, link_id: int, card: CardDetails, installments: int, now: datetime
) -> Reserved | CardLocked | CardInProgress | LinkNotPayable:
    async with database.session() as session:
        link = await _lock_link(session, link_id)
        status = status_at(link, now)
        if status != "CREATED":
            return LinkNotPayable(status)
        locked_until = await card_lock(session, link_id=link_id, now=now)
        if locked_until is not None:
            return CardLocked(locked_until)
        in_flight = await session.scalar(
            select(func.count())
            .select_from(CardAttempt)
            .where(
                CardAttempt.link_id == link_id,
                CardAttempt.status == "PENDING",
                CardAttempt.started_at > now - PENDING_FOR,
            )
        )
        if in_flight:
            return CardInProgress()
        attempt = CardAttempt(
            link_id=link_id,
            customer_id=link.customer_id,
            status="PENDING",
            brand=card.brand_name,
            last4=card.last4,
            installments=installments,
            started_at=now,
        )
        session.add(attempt)
        await session.flush()
        reserved = Reserved(attempt.id, link.amount_cents)
        await session.commit()
        return reserved


async def _record_refusal(
    session: AsyncSession, attempt: CardAttempt, reason: Refusal, now: datetime
) -> datetime | None:
    attempt.status, attempt.refusal, attempt.finished_at = "REFUSED", reason.value, now
    await session.flush()
    last_lock_end = await session.scalar(
        select(func.max(CardAttempt.locks_until)).where(CardAttempt.link_id == attempt.link_id)
    )
    refusals = await session.scalar(
        select(func.count())
        .select_from(CardAttempt)
        .where(
            CardAttempt.link_id == attempt.link_id,
            CardAttempt.status == "REFUSED",
            CardAttempt.finished_at >= (last_lock_end or _EPOCH),
        )
    )
    if (refusals or 0) >= LOCK_AFTER_REFUSALS:
        attempt.locks_until = now + LOCK_FOR
    return attempt.locks_until


async def pay_by_card(
    database: Database,
    *,
    link_id: int,
    card: CardDetails,
    installments: int,
    processor: CardProcessor,
    timeout_seconds: float,
) -> CardOutcome:
    """Charge the card for the link in `installments` and, once approved, pay the link."""
    reservation = await _reserve(
        database, link_id=link_id, card=card, installments=installments, now=clock.now()
    )
    if not isinstance(reservation, Reserved):
        return reservation
    authorization = CardAuthorization(
        reference=f"tucano-card-attempt-{reservation.attempt_id}",
        amount_cents=reservation.amount_cents,
        installment_cents=tuple(split_into_installments(reservation.amount_cents, installments)),
        card=card,
    )
    try:
        answer = await asyncio.wait_for(processor.authorize(authorization), timeout_seconds)
    except Exception as exc:  # a processor that fails or is too slow refuses, as one that answers
        log.warning(
            "card_processor_failed",
            processor=processor.name,
            attempt=reservation.attempt_id,
            error=type(exc).__name__,
        )
        answer = Refused(Refusal.PROCESSING_ERROR)
    if isinstance(answer, Approved) and not _NSU.fullmatch(answer.nsu):
        # An approval Tucano cannot record as decisions.md says: undone, and the processor's
        # fault to fix (its log line says so), not the payer's.
        log.error(
            "card_processor_gave_no_nsu", processor=processor.name, attempt=reservation.attempt_id
        )
        await processor.void(nsu=answer.nsu, authorization=authorization)
        answer = Refused(Refusal.PROCESSING_ERROR)
    outcome = await _record(database, reservation.attempt_id, link_id, installments, answer)
    if isinstance(outcome, LinkNotPayable) and isinstance(answer, Approved):
        # Paid by PIX (or expired) while the card was being charged: the charge is undone.
        await processor.void(nsu=answer.nsu, authorization=authorization)
        log.warning("card_payment_voided", attempt=reservation.attempt_id, status=outcome.status)
    return outcome


async def _record(
    database: Database,
    attempt_id: int,
    link_id: int,
    installments: int,
    answer: Approved | Refused,
) -> CardOutcome:
    now = clock.now()
    async with database.session() as session:
        link = await _lock_link(session, link_id)
        attempt = await session.get(CardAttempt, attempt_id, populate_existing=True)
        assert attempt is not None
        if isinstance(answer, Refused):
            locked_until = await _record_refusal(session, attempt, answer.reason, now)
            await session.commit()
            log.info(
                "card_payment_refused",
                attempt=attempt_id,
                reason=answer.reason.value,
                brand=attempt.brand,
                last4=attempt.last4,
                locked=locked_until is not None,
            )
            return CardRefused(answer.reason, locked_until)
        status = status_at(link, now)
        if status != "CREATED":
            attempt.status, attempt.nsu, attempt.finished_at = "VOIDED", answer.nsu, now
            await session.commit()
            return LinkNotPayable(status)
        payment = await link_payments.pay_link(
            session, link=link, method=METHOD_CARD, installments=installments, receipt=answer.nsu
        )
        attempt.status, attempt.nsu, attempt.finished_at = "APPROVED", answer.nsu, now
        await session.commit()
    log.info("card_payment_approved", attempt=attempt_id, brand=attempt.brand, last4=attempt.last4)
    return CardPaid(payment, attempt)
