"""Card testing across links (decisions.md, "Fixes from outside tests"): besides the lock of
each link (card_payments), at most TUCANO_CARD_REFUSALS_PER_ADDRESS refused card attempts per
source address (10 an hour) and TUCANO_CARD_REFUSALS_PER_CARD per card number (5 an hour),
whatever the link; over either, the processor is not asked.

The rate-limit store knows a card only by a keyed hash of its number (HMAC-SHA256 under a key
derived from the service's secret key for this alone), kept as long as its count: a copy of the
store gives no number back, and without the key no list of numbers can be hashed to find one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from tucano.api.rate_limits import CardAttemptsSpent, RateLimits
from tucano.checkout.card_payments import CardOutcome, CardRefused
from tucano.checkout.cards import CardDetails

log = structlog.get_logger("tucano.checkout")

KEY_PURPOSE = "card-number-budget"


@dataclass(frozen=True)
class CardBudgets:
    rate_limits: RateLimits
    key: bytes  # derived from the secret key for KEY_PURPOSE

    def card_key(self, card: CardDetails) -> str:
        """What the rate-limit store counts the card under: never its number."""
        return hmac.new(self.key, card.number.encode(), hashlib.sha256).hexdigest()


async def pay_within_budgets(
    budgets: CardBudgets,
    *,
    host: str,
    card: CardDetails,
    pay: Callable[[], Awaitable[CardOutcome]],
) -> CardOutcome | CardAttemptsSpent:
    """`pay()` if the address and the card have refusals left, counting its outcome if it is a
    refusal; what is spent otherwise."""
    card_key = budgets.card_key(card)
    spent = await budgets.rate_limits.reserve_card_attempt(host, card_key)
    if spent is not None:
        log.warning(
            "card_attempts_over_budget",
            budget=spent.budget,
            brand=card.brand_name,
            last4=card.last4,
            retry_after=spent.retry_after,
        )
        return spent
    refused = False
    try:
        outcome = await pay()
        refused = isinstance(outcome, CardRefused)
    finally:
        # Approved, locked, in progress, not payable, or failed here: no refusal to count.
        if not refused:
            await budgets.rate_limits.release_card_attempt(host, card_key)
    return outcome
