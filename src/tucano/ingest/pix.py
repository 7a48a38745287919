"""A Pix payment reported by the Pix system pays the payment link whose BR Code it paid.

A `PIX_QR_INBOUND` event of type PAYMENT, published for a customer, whose `txid` is one of that
customer's links, whose `amount` is the link's and whose `status` does not say it failed or is
still pending, pays the link (receipt: its end-to-end id)
in the transaction that stores the event, through payment_links' one payment service, which
publishes `PAYMENT_LINK_INBOUND` in that same transaction. Anything else pays nothing and is
logged; the event itself is delivered as any other.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.clock import clock
from tucano.core.money import to_cents
from tucano.deliveries.service import NewEvent
from tucano.events.payloads import PixQrInbound
from tucano.events.types import EventType
from tucano.payment_links import service as payment_links
from tucano.payment_links.domain import METHOD_PIX, status_at
from tucano.payment_links.models import Payment, PaymentLink

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


def pays_a_link(event: NewEvent) -> bool:
    """Whether publishing `event` may pay a payment link."""
    return (
        event.event_type is EventType.PIX_QR_INBOUND
        and isinstance(event.payload, PixQrInbound)
        and event.payload.type == "PAYMENT"
    )


async def settle_pix_payment(
    session: AsyncSession, *, customer_id: int, payment: PixQrInbound, event_id: str
) -> Payment | None:
    """Pay the customer's link whose txid and amount `payment` carries, if it is payable."""
    context = {"eventId": event_id, "customerId": customer_id, "txid": payment.txid}
    link = await payment_links.find_link_by_txid(
        session, customer_id=customer_id, txid=payment.txid
    )
    if link is None:
        log.info("pix_payment_matches_no_link", **context)
        return None
    if payment.status.strip().upper() in NOT_SETTLED:
        log.warning(
            "pix_payment_not_settled",
            **context,
            linkPaymentUuid=str(link.uuid),
            status=payment.status,
        )
        return None
    return await pay_link_by_pix(
        session,
        link=link,
        amount=payment.amount,
        end_to_end_id=payment.end_to_end_id,
        context=context,
    )


async def pay_link_by_pix(
    session: AsyncSession,
    *,
    link: PaymentLink,
    amount: Decimal,
    end_to_end_id: str,
    context: dict[str, Any],
) -> Payment | None:
    """Pay `link` (found by its txid and locked) with a Pix of `amount`, if that is its amount
    and it can still be paid; otherwise pay nothing and log why. `context` goes on every line."""
    context = {**context, "linkPaymentUuid": str(link.uuid)}
    if to_cents(amount) != link.amount_cents:
        log.warning(
            "pix_payment_amount_differs",
            **context,
            paid=str(amount),
            expected_cents=link.amount_cents,
        )
        return None
    status = status_at(link, clock.now())
    if status != "CREATED":
        log.warning("pix_payment_of_unpayable_link", **context, status=status)
        return None
    paid = await payment_links.pay_link(
        session, link=link, method=METHOD_PIX, receipt=end_to_end_id
    )
    log.info("pix_payment_paid_link", **context, paymentId=paid.payment_id)
    return paid
