"""What the payer's checkout page shows: the link its token names, checked first."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.errors import AppError, ErrorCode
from tucano.payment_links import service as links
from tucano.payment_links.checkout_tokens import (
    ExpiredCheckoutToken,
    InvalidCheckoutToken,
    verify_checkout_token,
)
from tucano.payment_links.models import Payment, PaymentLink
from tucano.payment_links.schemas import StatusName, status_at

NOT_A_CHECKOUT = (
    "this checkout address is not valid: its token is missing, altered or another link's"
)


@dataclass(frozen=True)
class Checkout:
    link: PaymentLink
    payment: Payment | None
    status: StatusName  # CREATED or PAID: an expired link opens no checkout


async def open_checkout(
    session: AsyncSession,
    *,
    link_uuid: uuid.UUID,
    token: str,
    keys: Sequence[bytes],
    now: datetime,
) -> Checkout:
    """The checkout of `link_uuid` if `token` opens it: 404 for a token that is missing,
    altered or another link's (saying which), 410 once the link has expired."""
    try:
        verify_checkout_token(token, link_uuid, keys=keys, now=now)
    except ExpiredCheckoutToken:
        pass  # genuine, and this link's: it still shows a link paid in time (below)
    except InvalidCheckoutToken:
        # The same answer whatever is wrong with it: nothing to learn about other links.
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT]) from None
    found = await links.find_link_for_checkout(session, link_uuid)
    if found is None:  # a genuine token outlives nothing: links are never deleted
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[NOT_A_CHECKOUT])
    link, payment = found
    status = status_at(link, now)
    if status == "EXPIRED":  # a paid link never expires; its page shows its payment
        raise AppError(ErrorCode.PAYMENT_LINK_EXPIRED, errors=["the payment link has expired"])
    return Checkout(link, payment, status)
