"""Who gives a payment's money back: the card processor for a card payment, the Pix provider for
a Pix one. One Refunder per process, made at start-up from the same settings as the checkout."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import structlog

from tucano.checkout.card_processor import CardProcessor, RefundDone
from tucano.core.clock import clock
from tucano.core.money import from_cents
from tucano.payment_links.domain import METHOD_CARD, PIX_REFUND_WINDOW
from tucano.payment_links.models import Payment, Refund
from tucano.pix.charges import retry_delay
from tucano.pix.provider import PixProvider, PixRefund
from tucano.pix.refunds import psp_refund_id

log = structlog.get_logger("tucano.refunds")

# How long a card processor or a PSP may take to answer a refund before it is asked again later.
ANSWER_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class RefundTask:
    """A PENDING refund as it is asked for: what the card processor or the PSP needs."""

    refund_id: int
    refund_uuid: uuid.UUID
    method: int
    amount_cents: int
    reason: str | None
    requested_at: datetime
    attempts: int
    receipt: str  # the payment's NSU (card) or end-to-end id (Pix)

    @classmethod
    def of(cls, refund: Refund, payment: Payment) -> RefundTask:
        return cls(
            refund_id=refund.id,
            refund_uuid=refund.uuid,
            method=refund.method,
            amount_cents=refund.amount_cents,
            reason=refund.reason,
            requested_at=refund.created_at,
            attempts=refund.attempts,
            receipt=payment.payment_receipt,
        )


@dataclass(frozen=True)
class RefundOutcome:
    status: Literal["PENDING", "SUCCEEDED", "FAILED"]
    failure_reason: str | None = None
    devolution_id: str | None = None
    ask_again_at: datetime | None = None
    error: str | None = None


@dataclass(frozen=True)
class Refunder:
    card: CardProcessor | None
    pix: PixProvider

    def refusal(self, payment: Payment, now: datetime) -> str | None:
        """Why this payment cannot be refunded here, if it cannot."""
        if payment.method == METHOD_CARD:
            if self.card is None:
                return "card refunds need a card processor (TUCANO_CARD_PROCESSOR)"
            return None
        if not self.pix.can_refund:
            return (
                f"the Pix provider ({self.pix.name.value}) cannot refund: the money is refunded "
                "by the systems that received it"
            )
        if now - payment.paid_at > PIX_REFUND_WINDOW:
            return "a Pix payment can be refunded up to 90 days after it was received"
        return None

    async def ask(self, task: RefundTask) -> RefundOutcome:
        """Ask for the refund (or about it); a failure to get an answer leaves it PENDING, to be
        asked again later with the same id."""
        try:
            if task.method == METHOD_CARD:
                return await asyncio.wait_for(self._ask_card(task), ANSWER_TIMEOUT_SECONDS)
            return await asyncio.wait_for(self._ask_pix(task), ANSWER_TIMEOUT_SECONDS)
        except Exception as exc:  # the answer is unknown: asked again, with the same reference
            log.warning(
                "refund_not_answered",
                refundId=str(task.refund_uuid),
                method=task.method,
                error=type(exc).__name__,
            )
            return RefundOutcome(
                "PENDING", ask_again_at=self._later(task), error=type(exc).__name__
            )

    async def _ask_card(self, task: RefundTask) -> RefundOutcome:
        assert self.card is not None  # refusal() said so before the refund was opened
        answer = await self.card.refund(
            nsu=task.receipt,
            amount_cents=task.amount_cents,
            reference=f"tucano-refund-{task.refund_uuid}",
        )
        if isinstance(answer, RefundDone):
            return RefundOutcome("SUCCEEDED")
        return RefundOutcome("FAILED", failure_reason=answer.reason[:300])

    async def _ask_pix(self, task: RefundTask) -> RefundOutcome:
        answer = await self.pix.refund(
            PixRefund(
                refund_id=psp_refund_id(task.refund_uuid),
                end_to_end_id=task.receipt,
                amount=from_cents(task.amount_cents),
                reason=task.reason,
                requested_at=task.requested_at,
                attempts=task.attempts,
            )
        )
        return RefundOutcome(
            answer.status,
            failure_reason=answer.failure_reason,
            devolution_id=answer.devolution_id,
            ask_again_at=answer.ask_again_at or self._later(task),
            error=answer.error,
        )

    @staticmethod
    def _later(task: RefundTask) -> datetime:
        delay: timedelta = retry_delay(task.attempts + 1)
        return clock.now() + delay
