"""Merchant profiles: set by the operator, read by the checkout (with the sandbox's stand-in)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.pix_keys import sandbox_pix_key
from tucano.core.clock import format_utc
from tucano.customers.models import MerchantProfile
from tucano.customers.repository import MerchantProfileRepository
from tucano.customers.schemas import MerchantProfileInput

DEFAULT_MCC = "0000"  # "not informed", as the BR Code manual allows
SANDBOX_MERCHANT_NAME = "TUCANO SANDBOX"
SANDBOX_MERCHANT_CITY = "SAO PAULO"


async def set_profile(
    session: AsyncSession,
    *,
    customer_id: int,
    profile: MerchantProfileInput,
    clear_pix_key: bool = False,
    now: datetime,
) -> MerchantProfile:
    """Create or change the customer's profile: a Pix key or MCC left out keeps its value."""
    profiles = MerchantProfileRepository(session)
    found = await profiles.get(customer_id, for_update=True)
    stored = found or MerchantProfile(
        customer_id=customer_id, pix_key=None, mcc=DEFAULT_MCC, created_at=now
    )
    stored.merchant_name = profile.merchant_name
    stored.merchant_city = profile.merchant_city
    if clear_pix_key:
        stored.pix_key = None
    elif profile.pix_key is not None:
        stored.pix_key = profile.pix_key
    if profile.mcc is not None:
        stored.mcc = profile.mcc
    stored.updated_at = now
    if found is None:
        return await profiles.add(stored)
    await session.flush()
    return stored


async def get_profile(session: AsyncSession, *, customer_id: int) -> MerchantProfile | None:
    return await MerchantProfileRepository(session).get(customer_id)


@dataclass(frozen=True)
class Merchant:
    """Who a payer pays, as the checkout shows it and the BR Code carries it."""

    name: str
    city: str
    pix_key: str | None
    mcc: str
    sandbox_stand_in: bool  # no profile set: the sandbox's evidently fake one


def merchant_of(
    profile: MerchantProfile | None, *, customer_id: int, sandbox: bool
) -> Merchant | None:
    """The merchant behind a customer's links; None in production without a profile."""
    if profile is not None:
        return Merchant(
            profile.merchant_name, profile.merchant_city, profile.pix_key, profile.mcc, False
        )
    if not sandbox:
        return None
    return Merchant(
        SANDBOX_MERCHANT_NAME,
        SANDBOX_MERCHANT_CITY,
        sandbox_pix_key(customer_id),
        DEFAULT_MCC,
        True,
    )


def profile_summary(profile: MerchantProfile) -> dict[str, object]:
    """The profile as `tucano customers set` and `show` print it."""
    return {
        "customerId": profile.customer_id,
        "merchantName": profile.merchant_name,
        "merchantCity": profile.merchant_city,
        "pixKey": profile.pix_key,
        "mcc": profile.mcc,
        "createdAt": format_utc(profile.created_at),
        "updatedAt": format_utc(profile.updated_at),
    }
