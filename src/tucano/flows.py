"""Work that spans two features: a PIX payment reported by the PIX system pays the payment link
whose BR Code it paid.

A `PIX_QR_INBOUND` event of type PAYMENT, published for a customer, whose `txid` is one of that
customer's links, whose `amount` is the link's and whose `status` does not say it failed or is
still pending, pays the link (receipt: its end-to-end id)
in the transaction that stores the event, through payment_links' one payment service, which
publishes `PAYMENT_LINK_INBOUND` in that same transaction. Anything else pays nothing and is
logged; the event itself is delivered as any other.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.clock import clock
from tucano.core.money import to_cents
from tucano.deliveries import outbox
from tucano.events.payloads import PixQrInbound
from tucano.events.types import EventType
from tucano.payment_links import payments as link_payments
from tucano.payment_links import reads as link_reads
from tucano.payment_links.models import Payment
from tucano.payment_links.schemas import METHOD_PIX, status_at

log = structlog.get_logger("tucano.pix")

# Statuses PIX systems report for a payment that has not happened, or not yet (PSPs' words,
# and the Banco Central's API's for a charge): such an event pays nothing. Any other status of
# a PAYMENT (CONFIRMED, CONCLUIDA, COMPLETED, ...) is money received.
NOT_SETTLED = frozenset(
    {
        "PENDING", "PROCESSING", "IN_PROCESS", "SCHEDULED", "REJECTED", "FAILED", "ERROR",
        "DENIED", "REFUSED", "CANCELED", "CANCELLED", "EXPIRED", "REVERSED", "REFUNDED",
        "RETURNED", "ATIVA", "EM_PROCESSAMENTO", "NAO_REALIZADO", "REJEITADA", "REJEITADO",
        "CANCELADA", "CANCELADO", "DEVOLVIDA", "DEVOLVIDO", "REMOVIDA_PELO_USUARIO_RECEBEDOR",
        "REMOVIDA_PELO_PSP",
    }
)  # fmt: skip


def pays_a_link(event: outbox.NewEvent) -> bool:
    """Whether publishing `event` may pay a payment link (and so needs a transaction)."""
    return (
        event.event_type is EventType.PIX_QR_INBOUND
        and isinstance(event.payload, PixQrInbound)
        and event.payload.type == "PAYMENT"
    )


async def publish_events_paying_links(
    session: AsyncSession, events: Sequence[outbox.NewEvent]
) -> list[outbox.PublishedEvent]:
    """outbox.publish_events, and the links the PIX payments among them pay, in the
    caller's transaction."""
    published = await outbox.publish_events(session, events)
    for event, stored in zip(events, published, strict=True):
        if pays_a_link(event):
            assert isinstance(event.payload, PixQrInbound)
            await settle_pix_payment(
                session, customer_id=event.customer_id, payment=event.payload, event_id=stored.id
            )
    return published


async def settle_pix_payment(
    session: AsyncSession, *, customer_id: int, payment: PixQrInbound, event_id: str
) -> Payment | None:
    """Pay the customer's link whose txid and amount `payment` carries, if it is payable."""
    context = {"eventId": event_id, "customerId": customer_id, "txid": payment.txid}
    link = await link_reads.find_link_by_txid(session, customer_id=customer_id, txid=payment.txid)
    if link is None:
        log.info("pix_payment_matches_no_link", **context)
        return None
    context["linkPaymentUuid"] = str(link.uuid)
    if payment.status.strip().upper() in NOT_SETTLED:
        log.warning("pix_payment_not_settled", **context, status=payment.status)
        return None
    if to_cents(payment.amount) != link.amount_cents:
        log.warning(
            "pix_payment_amount_differs",
            **context,
            paid=str(payment.amount),
            expected_cents=link.amount_cents,
        )
        return None
    status = status_at(link, clock.now())
    if status != "CREATED":
        log.warning("pix_payment_of_unpayable_link", **context, status=status)
        return None
    paid = await link_payments.pay_link(
        session, link=link, method=METHOD_PIX, receipt=payment.end_to_end_id
    )
    log.info("pix_payment_paid_link", **context, paymentId=paid.payment_id)
    return paid
