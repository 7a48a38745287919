"""Every table of the service, imported in one place so Alembic and tests see the whole schema."""

from tucano.auth.models import ApiClient, InstanceSecret
from tucano.checkout.models import CardAttempt
from tucano.customers.models import MerchantProfile
from tucano.db.base import Base
from tucano.deliveries.models import (
    CancelledDelivery,
    Delivery,
    DeliveryResult,
    DeliveryResultCount,
    Event,
)
from tucano.ingest.models import EventIdempotencyKey
from tucano.payment_links.models import (
    IdempotencyKey,
    LinkDayChange,
    LinkDayTotal,
    Payment,
    PaymentLink,
)
from tucano.pix.models import PixCharge
from tucano.portal.models import PortalSession
from tucano.webhooks.models import Webhook

metadata = Base.metadata

__all__ = [
    "ApiClient",
    "CancelledDelivery",
    "CardAttempt",
    "Delivery",
    "DeliveryResult",
    "DeliveryResultCount",
    "Event",
    "EventIdempotencyKey",
    "IdempotencyKey",
    "InstanceSecret",
    "LinkDayChange",
    "LinkDayTotal",
    "MerchantProfile",
    "Payment",
    "PaymentLink",
    "PixCharge",
    "PortalSession",
    "Webhook",
    "metadata",
]
