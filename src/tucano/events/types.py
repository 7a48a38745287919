"""The event types a webhook can subscribe to (spec section 6)."""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    PIX_OUTBOUND = "PIX_OUTBOUND"
    PIX_QR_INBOUND = "PIX_QR_INBOUND"
    PIX_QR_PARTNER_INBOUND = "PIX_QR_PARTNER_INBOUND"
    CARD_PAYMENT_INBOUND = "CARD_PAYMENT_INBOUND"
    CARD_CHARGEBACK = "CARD_CHARGEBACK"
    CARD_RECURRING_INBOUND = "CARD_RECURRING_INBOUND"
    PAYMENT_LINK_INBOUND = "PAYMENT_LINK_INBOUND"
