"""What the checkout's routes work with, made once at start-up (app.py) and given to each route
as one typed dependency."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends

from tucano.api.deps import provided
from tucano.api.rate_limits import RateLimits
from tucano.checkout.card_budgets import CardBudgets
from tucano.checkout.card_processor import CardProcessor
from tucano.checkout.rendering import Site
from tucano.config import Settings
from tucano.db.database import Database
from tucano.pix.provider import PixProvider


@dataclass(frozen=True)
class Checkouts:
    site: Site
    database: Database
    keys: Sequence[bytes]  # that open checkout tokens: the current one, then earlier ones
    card_processor: CardProcessor | None
    card_timeout_seconds: float
    card_budgets: CardBudgets  # refused card attempts per address and per card, across links
    pix: PixProvider  # how a link's Pix is offered and confirmed

    @classmethod
    def of(
        cls,
        settings: Settings,
        database: Database,
        *,
        csrf_key: bytes,
        keys: Sequence[bytes],
        card_processor: CardProcessor | None,
        rate_limits: RateLimits,
        card_budget_key: bytes,
        pix: PixProvider,
    ) -> Checkouts:
        return cls(
            site=Site(
                sandbox=settings.is_sandbox,
                https=settings.public_url.startswith("https://"),
                csrf_key=csrf_key,
            ),
            database=database,
            keys=keys,
            card_processor=card_processor,
            card_timeout_seconds=settings.card_processor_timeout_seconds,
            card_budgets=CardBudgets(rate_limits, card_budget_key),
            pix=pix,
        )


CheckoutsDep = Annotated[Checkouts, Depends(provided("checkouts"))]
