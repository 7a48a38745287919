"""What the payment-link routes work with, made once at start-up (app.py) and given to each
route as one typed dependency: each level of FastAPI's dependency resolution costs more than
these routes' own work."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends

from tucano.api.deps import provided
from tucano.config import Settings
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.payment_links.schemas import link_document


@dataclass(frozen=True)
class PaymentLinks:
    database: Database
    public_url: str
    checkout_key: bytes  # signs the token of each link's urlPayment
    autopay_delay: timedelta | None  # sandbox: the automatic Pix payment of amounts ending in 01

    @classmethod
    def of(cls, settings: Settings, database: Database, checkout_key: bytes) -> PaymentLinks:
        return cls(
            database=database,
            public_url=settings.public_url,
            checkout_key=checkout_key,
            autopay_delay=(
                timedelta(seconds=settings.sandbox_autopay_delay_seconds)
                if settings.is_sandbox
                else None
            ),
        )

    def presenter(self) -> Callable[..., dict[str, Any]]:
        """Links as this request shows them: statuses at this moment, checkout URLs of this
        host."""
        now = clock.now()

        def present(link: Any, payment: Any, refunds: Sequence[Any] = ()) -> dict[str, Any]:
            return link_document(
                link,
                payment,
                refunds,
                now=now,
                public_url=self.public_url,
                checkout_key=self.checkout_key,
            )

        return present


PaymentLinksDep = Annotated[PaymentLinks, Depends(provided("payment_links"))]
