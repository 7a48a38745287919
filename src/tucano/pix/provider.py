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
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.brcode import build_br_code
from tucano.brazil.pix import SANDBOX_ISPB, new_end_to_end_id
from tucano.config import PixProviderName, Settings
from tucano.core.clock import clock
from tucano.core.money import from_cents, to_cents
from tucano.customers.service import Merchant
from tucano.payment_links.models import PaymentLink
from tucano.pix.charges import ChargesAtPsp, PspRefused, PspUnreachable, retry_delay
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


@dataclass(frozen=True)
class PixRefund:
    """Give back `amount` of the Pix `end_to_end_id`; `refund_id` (1 to 35 letters and digits)
    is Tucano's, the same each time the refund is asked for or about."""

    refund_id: str
    end_to_end_id: str
    amount: Decimal
    reason: str | None
    requested_at: datetime
    attempts: int  # how many times it was asked before


@dataclass(frozen=True)
class PixRefundOutcome:
    status: Literal["PENDING", "SUCCEEDED", "FAILED"]
    devolution_id: str | None = None  # the devolution's own end-to-end id
    failure_reason: str | None = None  # FAILED: fit for the merchant
    ask_again_at: datetime | None = None  # PENDING: when to ask about it again
    error: str | None = None  # PENDING after a failed call: for the log


class PixProvider(Protocol):
    @property
    def name(self) -> PixProviderName: ...

    @property
    def can_refund(self) -> bool:
        """Whether Pix payments can be given back through this provider."""
        ...

    async def offer(
        self, session: AsyncSession, *, link: PaymentLink, merchant: Merchant | None
    ) -> PixOffer:
        """The Pix the payer of the open `link` is offered."""
        ...

    async def refund(self, refund: PixRefund) -> PixRefundOutcome:
        """Ask for (or about) a refund; never raises for the PSP's failures."""
        ...


SANDBOX_FAILING_REFUND_CENTS = 13


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
    (`sandbox`). The sandbox settles a refund `refund_delay` after it was asked for (failed if
    its amount ends in 13 cents); `events` cannot refund (the provider's systems own the money)."""

    name: PixProviderName
    refund_delay: timedelta = timedelta(seconds=5)

    @property
    def can_refund(self) -> bool:
        return self.name is PixProviderName.SANDBOX

    async def refund(self, refund: PixRefund) -> PixRefundOutcome:
        if not self.can_refund:
            return PixRefundOutcome("FAILED", failure_reason="the Pix provider cannot refund")
        due = refund.requested_at + self.refund_delay
        now = clock.now()
        if now < due:
            return PixRefundOutcome("PENDING", ask_again_at=due)
        if to_cents(refund.amount) % 100 == SANDBOX_FAILING_REFUND_CENTS:
            return PixRefundOutcome(
                "FAILED", failure_reason="sandbox: a refund whose amount ends in 13 cents fails"
            )
        devolution = "D" + new_end_to_end_id(ispb=SANDBOX_ISPB, at=now)[1:]
        return PixRefundOutcome("SUCCEEDED", devolution_id=devolution)

    async def offer(
        self, session: AsyncSession, *, link: PaymentLink, merchant: Merchant | None
    ) -> PixOffer:
        code = static_code(link, merchant)
        if code is None:
            return NO_PIX
        return PixOffer(code=code, simulated=self.name is PixProviderName.SANDBOX)


@dataclass(frozen=True)
class ChargeProvider:
    """A dynamic charge per link at the merchant's PSP (pix/charges.py makes and settles it);
    refunds are the PSP's devolutions (natureza ORIGINAL), settled by its webhook or by asking."""

    psp: ChargesAtPsp | None = None
    name: PixProviderName = PixProviderName.API_PIX

    @property
    def can_refund(self) -> bool:
        return True

    async def refund(self, refund: PixRefund) -> PixRefundOutcome:
        assert self.psp is not None  # pix_provider_for gives one
        try:
            answer = await self.psp.refund(
                refund.end_to_end_id,
                refund.refund_id,
                amount=refund.amount,
                description=refund.reason,
            )
        except PspRefused as refused:
            return PixRefundOutcome(
                "FAILED", failure_reason=f"the PSP refused the refund: {refused}"[:300]
            )
        except PspUnreachable as unreachable:
            return PixRefundOutcome(
                "PENDING",
                ask_again_at=clock.now() + retry_delay(refund.attempts + 1),
                error=str(unreachable),
            )
        if answer.status == "DEVOLVIDO":
            return PixRefundOutcome("SUCCEEDED", devolution_id=answer.devolution_id)
        if answer.status == "NAO_REALIZADO":
            return PixRefundOutcome(
                "FAILED",
                devolution_id=answer.devolution_id,
                failure_reason=("the PSP did not make the refund: " + (answer.reason or ""))[:300],
            )
        return PixRefundOutcome(
            "PENDING",
            devolution_id=answer.devolution_id,
            ask_again_at=clock.now() + retry_delay(refund.attempts + 1),
        )

    async def offer(
        self, session: AsyncSession, *, link: PaymentLink, merchant: Merchant | None
    ) -> PixOffer:
        charge = await PixChargeRepository(session).for_link(link.id)
        if charge is None or charge.status == PENDING:
            return PIX_ON_ITS_WAY
        if charge.status == ACTIVE and charge.pix_copia_e_cola:
            return PixOffer(code=charge.pix_copia_e_cola, simulated=False)
        return NO_PIX


def pix_provider_for(settings: Settings, psp: ChargesAtPsp | None = None) -> PixProvider:
    """The provider TUCANO_PIX_PROVIDER names (its default: sandbox, or events in production);
    with api-pix, `psp` is the PSP its refunds go to."""
    name = settings.pix_provider_name
    if name is PixProviderName.API_PIX:
        return ChargeProvider(psp)
    return StaticCodeProvider(
        name, refund_delay=timedelta(seconds=settings.sandbox_refund_delay_seconds)
    )
