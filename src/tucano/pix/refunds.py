"""The end of a Pix refund: the refund's final state and the link's event (payment_links'
lifecycle), and, when the money went back, a `PIX_QR_INBOUND` of type REFUND in the same
transaction, as the Pix system reports a devolution of a received Pix."""

from __future__ import annotations

import uuid

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.clock import clock
from tucano.core.money import from_cents
from tucano.deliveries import service as deliveries
from tucano.events.payloads import Party, PixQrInbound
from tucano.events.types import EventType
from tucano.payment_links import lifecycle
from tucano.payment_links.models import Payment, PaymentLink, Refund
from tucano.pix.repository import PixChargeRepository

log = structlog.get_logger("tucano.pix")


def psp_refund_id(refund_uuid: uuid.UUID) -> str:
    """The id a refund has at the PSP (API Pix: 1 to 35 letters and digits): its UUID's hex."""
    return refund_uuid.hex


def refund_uuid_of(psp_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(hex=psp_id)
    except ValueError:
        return None


async def finish_pix_refund(
    session: AsyncSession,
    refund_id: int,
    *,
    succeeded: bool,
    failure_reason: str | None = None,
    devolution_id: str | None = None,
) -> Refund | None:
    """Give a PENDING Pix refund its final state and publish its events; None when it had one
    already."""
    finished = await lifecycle.finish_refund(
        session,
        refund_id,
        succeeded=succeeded,
        failure_reason=failure_reason,
        devolution_id=devolution_id,
    )
    if finished is None:
        return None
    refund, link, payment = finished
    if succeeded:
        await deliveries.publish_event(
            session,
            customer_id=link.customer_id,
            event_type=EventType.PIX_QR_INBOUND,
            payload=await devolution_event(session, refund, link, payment),
        )
    log.info(
        "pix_refund_finished",
        customerId=link.customer_id,
        linkPaymentUuid=str(link.uuid),
        refundId=str(refund.uuid),
        status=refund.status,
    )
    return refund


async def devolution_event(
    session: AsyncSession, refund: Refund, link: PaymentLink, payment: Payment
) -> PixQrInbound:
    charge = await PixChargeRepository(session).for_link(link.id)
    return PixQrInbound(
        txid=charge.txid if charge is not None else link.pix_txid,
        amount=from_cents(refund.amount_cents),
        payer=Party(document_number=link.registration_number, name=link.payer_name),
        end_to_end_id=payment.payment_receipt,
        devolution_end_to_end_id=refund.devolution_id or psp_refund_id(refund.uuid),
        type="REFUND",
        status="REFUNDED",
        payment_date=refund.completed_at or clock.now(),
        user_reference=link.user_reference,
    )


async def settle_reported_refund(
    session: AsyncSession,
    *,
    psp_id: str,
    status: str,
    devolution_id: str | None,
    reason: str | None,
) -> Refund | None:
    """A devolution's final state as the PSP's webhook reports it; a refund Tucano does not
    know, or one still in progress, changes nothing."""
    refund_uuid = refund_uuid_of(psp_id)
    refund = None if refund_uuid is None else await lifecycle.find_refund(session, refund_uuid)
    if refund is None:
        log.warning("pix_refund_matches_nothing", pspRefundId=psp_id[:40])
        return None
    if status not in ("DEVOLVIDO", "NAO_REALIZADO"):
        return None
    return await finish_pix_refund(
        session,
        refund.id,
        succeeded=status == "DEVOLVIDO",
        failure_reason=None
        if status == "DEVOLVIDO"
        else ("the PSP did not make the refund: " + (reason or ""))[:300],
        devolution_id=devolution_id,
    )
