"""What the payer's checkout page shows: the link its token names, checked first."""

from __future__ import annotations

import uuid
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


@dataclass(frozen=True)
class Checkout:
    link: PaymentLink
    payment: Payment | None
    status: StatusName  # CREATED or PAID: an expired link opens no checkout


async def open_checkout(
    session: AsyncSession, *, link_uuid: uuid.UUID, token: str, key: bytes, now: datetime
) -> Checkout:
    """The checkout of `link_uuid` if `token` opens it: 404 for a token that is missing,
    altered or another link's (saying which), 410 once the link has expired."""
    try:
        verify_checkout_token(token, link_uuid, key=key, now=now)
    except ExpiredCheckoutToken as exc:
        raise AppError(ErrorCode.PAYMENT_LINK_EXPIRED, errors=[str(exc)]) from None
    except InvalidCheckoutToken as exc:
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND, errors=[str(exc)]) from None
    found = await links.find_link_for_checkout(session, link_uuid)
    if found is None:  # a genuine token outlives nothing: links are never deleted
        raise AppError(ErrorCode.PAYMENT_LINK_NOT_FOUND)
    link, payment = found
    status = status_at(link, now)
    if status == "EXPIRED":  # the token's expiry is whole seconds, the link's is exact
        raise AppError(ErrorCode.PAYMENT_LINK_EXPIRED, errors=["the payment link has expired"])
    return Checkout(link, payment, status)
