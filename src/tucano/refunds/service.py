"""Refunding a paid link: the refund is recorded PENDING under the link's lock (never more than
is left, whatever runs at once), asked of the card processor or the Pix provider outside any
transaction, and its answer recorded with the link's events. One that stays PENDING (a Pix
devolution in progress, a processor that did not answer, a process stopped meanwhile) is asked
about again by a job until it ends."""

from __future__ import annotations

from datetime import timedelta

import structlog
from sqlalchemy.exc import IntegrityError

from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.metrics import REFUND_ANSWERS
from tucano.db.database import Database
from tucano.payment_links import lifecycle
from tucano.payment_links.domain import METHOD_PIX
from tucano.payment_links.lifecycle import RefundRequest
from tucano.payment_links.models import Refund
from tucano.payment_links.schemas import refund_document
from tucano.pix.refunds import finish_pix_refund
from tucano.refunds.refunder import Refunder, RefundOutcome, RefundTask

log = structlog.get_logger("tucano.refunds")

# A refund being asked for is left alone by the job for this long (longer than any answer).
LEASE = timedelta(minutes=2)
BATCH = 50


async def request_refund(database: Database, refunder: Refunder, request: RefundRequest) -> bytes:
    """Refund a customer's PAID link as `request` asks; the refund as answered (JSON). The same
    x-transaction-id again answers what it answered the first time, refunding nothing more."""
    try:
        async with database.session() as session:
            link, payment = await lifecycle.lock_link(
                session, customer_id=request.customer_id, link_uuid=request.link_uuid
            )
            replay = await lifecycle.find_refund_replay(session, request)
            if replay is not None:
                return answer_of(replay)
            paid = lifecycle.paid_payment(link, payment)
            refusal = refunder.refusal(paid, clock.now())
            if refusal is not None:
                raise lifecycle.not_refundable(refusal)
            refund = await lifecycle.open_refund(
                session,
                link=link,
                payment=paid,
                request=request,
                first_attempt_at=clock.now() + LEASE,
            )
            task = RefundTask.of(refund, paid)
            await session.commit()
    except IntegrityError:
        # The same x-transaction-id, for another link, at the same moment: that one won.
        async with database.read_session() as session:
            replay = await lifecycle.find_refund_replay(session, request)
        if replay is None:
            raise
        return answer_of(replay)
    log.info(
        "refund_requested",
        customerId=request.customer_id,
        linkPaymentUuid=str(request.link_uuid),
        refundId=str(task.refund_uuid),
        amountCents=task.amount_cents,
    )
    await carry_out(database, refunder, task)
    async with database.session() as session:
        ended = await lifecycle.get_refund(session, task.refund_id)
        assert ended is not None  # refunds are deleted only with their link
        answer = json_codec.dumps(refund_document(ended))
        await lifecycle.keep_refund_answer(session, ended.id, answer)
        await session.commit()
    return answer


def answer_of(refund: Refund) -> bytes:
    """What a repeated request gets: the first answer, or (if it was never sent) the refund."""
    if refund.answer is not None:
        return refund.answer.encode()
    return json_codec.dumps(refund_document(refund))


async def carry_out(database: Database, refunder: Refunder, task: RefundTask) -> RefundOutcome:
    """Ask for the refund and record the answer."""
    outcome = await refunder.ask(task)
    REFUND_ANSWERS.labels(
        "pix" if task.method == METHOD_PIX else "card", outcome.status.lower()
    ).inc()
    async with database.session() as session:
        if outcome.status == "PENDING":
            await lifecycle.postpone_refund(
                session,
                task.refund_id,
                until=outcome.ask_again_at or clock.now() + LEASE,
                error=outcome.error,
            )
        elif task.method == METHOD_PIX:
            await finish_pix_refund(
                session,
                task.refund_id,
                succeeded=outcome.status == "SUCCEEDED",
                failure_reason=outcome.failure_reason,
                devolution_id=outcome.devolution_id,
            )
        else:
            await lifecycle.finish_refund(
                session,
                task.refund_id,
                succeeded=outcome.status == "SUCCEEDED",
                failure_reason=outcome.failure_reason,
            )
        await session.commit()
    if outcome.status == "FAILED":
        log.warning("refund_failed", refundId=str(task.refund_uuid), reason=outcome.failure_reason)
    return outcome


async def run_due_refunds(database: Database, refunder: Refunder, *, limit: int = BATCH) -> int:
    """Ask again for (or about) the PENDING refunds that are due; how many ended."""
    async with database.session() as session:
        ids = await lifecycle.claim_due_refunds(session, lease=LEASE, limit=limit)
        await session.commit()
    ended = 0
    for refund_id in ids:
        async with database.session() as session:
            found = await lifecycle.refund_with_payment(session, refund_id)
        if found is None or found[0].status != "PENDING":
            continue
        outcome = await carry_out(database, refunder, RefundTask.of(*found))
        ended += outcome.status != "PENDING"
    return ended
