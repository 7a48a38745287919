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
from tucano.checkout.repository import CardAttemptRepository
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.payment_links import service as payment_links
from tucano.payment_links.domain import METHOD_CARD, split_into_installments, status_at
from tucano.payment_links.models import Payment

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
    status: str  # any but CREATED: PAID, EXPIRED, CANCELLED or REFUNDED


CardOutcome = CardPaid | CardRefused | CardLocked | CardInProgress | LinkNotPayable


async def card_lock(session: AsyncSession, *, link_id: int, now: datetime) -> datetime | None:
    """Until when card payment of the link is locked, if it is now."""
    until = await CardAttemptRepository(session).lock_end(link_id)
    return until if until is not None and until > now else None


async def approved_attempt(session: AsyncSession, *, link_id: int) -> CardAttempt | None:
    """The approved attempt that paid the link (for its receipt: brand and last four)."""
    return await CardAttemptRepository(session).approved(link_id)


@dataclass(frozen=True)
class Reserved:
    attempt_id: int
    amount_cents: int


async def _reserve(
    database: Database, *, link_id: int, card: CardDetails, installments: int, now: datetime
) -> Reserved | CardLocked | CardInProgress | LinkNotPayable:
    async with database.session() as session:
        link = await payment_links.lock_link(session, link_id)
        status = status_at(link, now)
        if status != "CREATED":
            return LinkNotPayable(status)
        locked_until = await card_lock(session, link_id=link_id, now=now)
        if locked_until is not None:
            return CardLocked(locked_until)
        attempts = CardAttemptRepository(session)
        if await attempts.pending_since(link_id, now - PENDING_FOR):
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
        await attempts.add(attempt)
        reserved = Reserved(attempt.id, link.amount_cents)
        await session.commit()
        return reserved


async def _record_refusal(
    session: AsyncSession, attempt: CardAttempt, reason: Refusal, now: datetime
) -> datetime | None:
    attempt.status, attempt.refusal, attempt.finished_at = "REFUSED", reason.value, now
    await session.flush()
    attempts = CardAttemptRepository(session)
    last_lock_end = await attempts.lock_end(attempt.link_id)
    if await attempts.refusals_since(attempt.link_id, last_lock_end or _EPOCH) >= (
        LOCK_AFTER_REFUSALS
    ):
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
        link = await payment_links.lock_link(session, link_id)
        attempt = await CardAttemptRepository(session).get(attempt_id)
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
        payment = await payment_links.pay_link(
            session, link=link, method=METHOD_CARD, installments=installments, receipt=answer.nsu
        )
        attempt.status, attempt.nsu, attempt.finished_at = "APPROVED", answer.nsu, now
        await session.commit()
    log.info("card_payment_approved", attempt=attempt_id, brand=attempt.brand, last4=attempt.last4)
    return CardPaid(payment, attempt)
