"""Who authorizes a card payment: the `CardProcessor` interface an acquirer's integration
implements, and the sandbox's, which answers by the documented test cards.

A processor gets the amount already split into the instalments Tucano records (the remainder
cent on the first), answers `Approved` with the acquirer's NSU or `Refused` with a reason, can
void an approval that Tucano could not use (the link was paid some other way meanwhile), and
refunds a captured charge in full or in part (`refund`, idempotent by its `reference`).
docs/checkout.md says how to plug in a real one (TUCANO_CARD_PROCESSOR=package.module:factory).
"""

from __future__ import annotations

import importlib
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from tucano.checkout.cards import CardDetails
from tucano.config import Settings


class Refusal(StrEnum):
    DECLINED = "DECLINED"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    PROCESSING_ERROR = "PROCESSING_ERROR"


@dataclass(frozen=True)
class CardAuthorization:
    """Charge `installment_cents` (adding up to `amount_cents`) to `card`; `reference` is
    Tucano's id of the attempt, unique, for the acquirer's idempotency and reconciliation."""

    reference: str
    amount_cents: int
    installment_cents: tuple[int, ...]
    card: CardDetails

    @property
    def installments(self) -> int:
        return len(self.installment_cents)


@dataclass(frozen=True)
class Approved:
    nsu: str  # the acquirer's Número Sequencial Único: 6 to 12 digits


@dataclass(frozen=True)
class Refused:
    reason: Refusal


@dataclass(frozen=True)
class RefundDone:
    """The acquirer gave the amount back to the card."""


@dataclass(frozen=True)
class RefundRefused:
    reason: str  # the acquirer's reason, shown to the merchant as the refund's failureReason


# The sandbox's failing refund: an amount ending in 13 cents (decisions.md).
SANDBOX_FAILING_REFUND_CENTS = 13
SANDBOX_REFUND_REFUSAL = "sandbox: a refund whose amount ends in 13 cents fails"


@runtime_checkable
class CardProcessor(Protocol):
    name: str

    async def authorize(self, authorization: CardAuthorization) -> Approved | Refused:
        """Authorize and capture the charge; never raise for a refusal."""
        ...

    async def void(self, *, nsu: str, authorization: CardAuthorization) -> None:
        """Cancel an approved charge in full."""
        ...

    async def refund(
        self, *, nsu: str, amount_cents: int, reference: str
    ) -> RefundDone | RefundRefused:
        """Give back `amount_cents` of the captured charge `nsu`. `reference` is Tucano's id of
        the refund: the same reference again must not refund twice (Tucano asks again when it
        never got the answer). Raise only when the answer is unknown (it is then asked again)."""
        ...


# decisions.md's test cards; any other valid number is declined.
SANDBOX_CARDS: dict[str, Approved | Refused | None] = {
    "4242424242424242": None,  # approved (None: with an NSU of its own)
    "5555555555554444": None,
    "4000000000000002": Refused(Refusal.DECLINED),
    "4000000000009995": Refused(Refusal.INSUFFICIENT_FUNDS),
    "4000000000000119": Refused(Refusal.PROCESSING_ERROR),
}


class SandboxCardProcessor:
    """Approves 4242 4242 4242 4242 and 5555 5555 5555 4444, refuses the other test cards with
    their reasons, declines every other number. Keeps nothing of the card."""

    name = "sandbox"

    def __init__(self) -> None:
        self.voided: list[str] = []

    async def authorize(self, authorization: CardAuthorization) -> Approved | Refused:
        known = SANDBOX_CARDS.get(authorization.card.number, Refused(Refusal.DECLINED))
        if known is None:
            return Approved(f"{secrets.randbelow(10**9):09d}")
        return known

    async def void(self, *, nsu: str, authorization: CardAuthorization) -> None:
        self.voided.append(nsu)

    async def refund(
        self, *, nsu: str, amount_cents: int, reference: str
    ) -> RefundDone | RefundRefused:
        if amount_cents % 100 == SANDBOX_FAILING_REFUND_CENTS:
            return RefundRefused(SANDBOX_REFUND_REFUSAL)
        return RefundDone()


class CardProcessorError(Exception):
    """TUCANO_CARD_PROCESSOR names nothing that makes a CardProcessor."""


def load_card_processor(settings: Settings) -> CardProcessor | None:
    """The configured processor, or None when card payment is off (production by default)."""
    name = settings.card_processor_name
    if name is None:
        return None
    if name == "sandbox":
        return SandboxCardProcessor()
    module_name, _, attribute = name.partition(":")
    try:
        factory: object = importlib.import_module(module_name)
        for part in attribute.split("."):
            factory = getattr(factory, part)
    except (ImportError, AttributeError) as exc:
        raise CardProcessorError(f"TUCANO_CARD_PROCESSOR: cannot load {name}: {exc}") from None
    if not callable(factory):
        raise CardProcessorError(f"TUCANO_CARD_PROCESSOR: {name} is not callable")
    processor = factory(settings)
    if not isinstance(processor, CardProcessor):
        raise CardProcessorError(
            f"TUCANO_CARD_PROCESSOR: {name}(settings) gave no CardProcessor "
            "(a name, and async authorize, void and refund methods)"
        )
    return processor
