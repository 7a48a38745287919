from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime


class Webhook(Base):
    __tablename__ = "webhooks"
    __table_args__ = (
        # Listing (A1) and fan-out of an event both go by customer and event type.
        Index("ix_webhooks_customer_event_type", "customer_id", "event_type", "id"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    partner_id: Mapped[int | None] = mapped_column(BigInteger)
    target_url: Mapped[str] = mapped_column(String(2048))
    event_type: Mapped[str] = mapped_column(String(40))
    is_active: Mapped[bool] = mapped_column(Boolean)
    # The signing secret, sealed (webhooks.secret_store): never the secret itself.
    secret: Mapped[str] = mapped_column(Text)
    # Secrets replaced by rotations, which keep signing beside the new one until their grace
    # ends: a JSON array of [secret, ISO 8601 end of grace], newest first (read and written by
    # webhooks.signing), sealed as one value. NULL when the secret was never rotated.
    previous_secrets: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Delivery health: when the current run of failures began (None after any success), and
    # when and why the service deactivated the webhook itself.
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    deactivated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    deactivation_reason: Mapped[str | None] = mapped_column(String(300))
