"""What the payer's checkout shows: the link its token names (checked first), who is paid, and
how the link can be paid now."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.checkout.card_payments import approved_attempt, card_lock
from tucano.checkout.models import CardAttempt
from tucano.core.errors import AppError, ErrorCode
from tucano.customers import service as customers
from tucano.customers.service import Merchant
from tucano.payment_links import service as payment_links
from tucano.payment_links.checkout_tokens import (
    ExpiredCheckoutToken,
    InvalidCheckoutToken,
    verify_checkout_token,
)
from tucano.payment_links.domain import METHOD_CARD, StatusName, status_at
from tucano.payment_links.models import Payment, PaymentLink, Refund
from tucano.pix.provider import NO_PIX, PixProvider

NOT_A_CHECKOUT = (
    "this checkout address is not valid: its token is missing, altered or another link's"
)


@dataclass(frozen=True)
class LinkOnCheckout:
    link: PaymentLink
    payment: Payment | None
    status: StatusName  # any but EXPIRED: an expired link opens no checkout


async def find_link(
    session: AsyncSession,
    *,
    link_uuid: uuid.UUID,
    token: str,
    keys: Sequence[bytes],
    now: datetime,
) -> LinkOnCheckout:
    """The link of `link_uuid` if `token` opens its checkout: 404 for a token that is missing,
    altered or another link's (one message whatever is wrong), 410 once the link has expired."""
    try:
        verify_checkout_token(token, link_uuid, keys=keys, now=now)
    except ExpiredCheckoutToken:
        pass  # genuine, and this link's: it still shows a link paid in time (below)
    except InvalidCheckoutToken:
        # The same answer whatever is wrong with it: nothing to learn about other links.
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT]) from None
    found = await payment_links.find_link_for_checkout(session, link_uuid)
    if found is None:  # a genuine token outlives nothing: links are never deleted
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT])
    link, payment = found
    status = status_at(link, now)
    if status == "EXPIRED":  # a paid link never expires; its page shows its payment
        raise AppError(ErrorCode.PAYMENT_LINK_EXPIRED, errors=["the payment link has expired"])
    return LinkOnCheckout(link, payment, status)


@dataclass(frozen=True)
class Checkout:
    link: PaymentLink
    payment: Payment | None
    status: StatusName
    merchant: Merchant | None  # None: production, and the operator set no profile
    pix_code: str | None  # the BR Code, while Pix can pay the link
    pix_simulated: bool  # the page may pay it by a button (the sandbox provider)
    pix_pending: bool  # the PSP's charge is on its way (api-pix)
    cards_accepted: bool  # while a card can pay the link (a processor is configured)
    card_locked_until: datetime | None
    paid_by_card: CardAttempt | None  # the approved attempt, for the receipt
    refunds: Sequence[Refund]  # of the payment, oldest first (the receipt shows some)


async def open_checkout(
    session: AsyncSession,
    *,
    link_uuid: uuid.UUID,
    token: str,
    keys: Sequence[bytes],
    now: datetime,
    sandbox: bool,
    card_processor_configured: bool,
    pix: PixProvider,
) -> Checkout:
    """Everything the page shows (see find_link for the refusals)."""
    found = await find_link(session, link_uuid=link_uuid, token=token, keys=keys, now=now)
    link = found.link
    profile = await customers.get_profile(session, customer_id=link.customer_id)
    merchant = customers.merchant_of(profile, customer_id=link.customer_id, sandbox=sandbox)
    open_link = found.status == "CREATED"
    offer = await pix.offer(session, link=link, merchant=merchant) if open_link else NO_PIX
    cards_accepted = open_link and card_processor_configured
    return Checkout(
        link=link,
        payment=found.payment,
        status=found.status,
        merchant=merchant,
        pix_code=offer.code,
        pix_simulated=offer.simulated,
        pix_pending=offer.pending,
        cards_accepted=cards_accepted,
        card_locked_until=(
            await card_lock(session, link_id=link.id, now=now) if cards_accepted else None
        ),
        paid_by_card=(
            await approved_attempt(session, link_id=link.id)
            if found.payment is not None and found.payment.method == METHOD_CARD
            else None
        ),
        refunds=await _refunds(session, found),
    )


async def _refunds(session: AsyncSession, found: LinkOnCheckout) -> Sequence[Refund]:
    if found.payment is None or not found.link.refund_count:
        return ()
    return (await payment_links.refunds_shown(session, [found.link])).get(found.link.id, ())
