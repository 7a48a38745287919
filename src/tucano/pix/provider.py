"""How a payment link's Pix is offered to its payer and confirmed: one provider per process,
chosen at start-up by TUCANO_PIX_PROVIDER (docs/pix.md).

- `sandbox`: a static BR Code made from the merchant's key, and a button on the page that pays
  the link as the Pix system would report it (sandbox only).
- `events`: the same static code, paid by `PIX_QR_INBOUND` events that the provider's own
  systems publish (ingest/pix.py).
- `api-pix`: a dynamic charge at the merchant's PSP through the Banco Central's API Pix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.brcode import build_br_code
from tucano.config import PixProviderName, Settings
from tucano.core.money import from_cents
from tucano.customers.service import Merchant
from tucano.payment_links.models import PaymentLink
from tucano.pix.models import ACTIVE, PENDING
from tucano.pix.repository import PixChargeRepository


@dataclass(frozen=True)
class PixOffer:
    """What the checkout shows of Pix for an open link."""

    code: str | None  # the BR Code ("copia e cola") the payer pays; None: no Pix for this link
    simulated: bool  # the page may pay it by a button (the sandbox)
    pending: bool = False  # a charge is on its way (api-pix): the page says so and offers card


NO_PIX = PixOffer(code=None, simulated=False)
PIX_ON_ITS_WAY = PixOffer(code=None, simulated=False, pending=True)


class PixProvider(Protocol):
    @property
    def name(self) -> PixProviderName: ...

    async def offer(
        self, session: AsyncSession, *, link: PaymentLink, merchant: Merchant | None
    ) -> PixOffer:
        """The Pix the payer of the open `link` is offered."""
        ...


def static_code(link: PaymentLink, merchant: Merchant | None) -> str | None:
    """The link's static BR Code, from the merchant's key and the link's txid, if both exist."""
    if merchant is None or not merchant.pix_key or not link.pix_txid:
        return None
    return build_br_code(
        pix_key=merchant.pix_key,
        merchant_name=merchant.name,
        merchant_city=merchant.city,
        txid=link.pix_txid,
        amount=from_cents(link.amount_cents),
        mcc=merchant.mcc,
    )


@dataclass(frozen=True)
class StaticCodeProvider:
    """A static BR Code per link, paid by events (`events`) or by the page's button
    (`sandbox`)."""

    name: PixProviderName

    async def offer(
        self, session: AsyncSession, *, link: PaymentLink, merchant: Merchant | None
    ) -> PixOffer:
        code = static_code(link, merchant)
        if code is None:
            return NO_PIX
        return PixOffer(code=code, simulated=self.name is PixProviderName.SANDBOX)


@dataclass(frozen=True)
class ChargeProvider:
    """A dynamic charge per link at the merchant's PSP (pix/charges.py makes and settles it)."""

    name: PixProviderName = PixProviderName.API_PIX

    async def offer(
        self, session: AsyncSession, *, link: PaymentLink, merchant: Merchant | None
    ) -> PixOffer:
        charge = await PixChargeRepository(session).for_link(link.id)
        if charge is None or charge.status == PENDING:
            return PIX_ON_ITS_WAY
        if charge.status == ACTIVE and charge.pix_copia_e_cola:
            return PixOffer(code=charge.pix_copia_e_cola, simulated=False)
        return NO_PIX


def pix_provider_for(settings: Settings) -> PixProvider:
    """The provider TUCANO_PIX_PROVIDER names (its default: sandbox, or events in production)."""
    name = settings.pix_provider_name
    if name is PixProviderName.API_PIX:
        return ChargeProvider()
    return StaticCodeProvider(name)
