"""The Idempotency-Keys of event publications."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import Base, UTCDateTime


class EventIdempotencyKey(Base):
    """An Idempotency-Key a publisher sent with POST /internal/v1/events, per API client, and
    the answer it got: replayed for 24 hours."""

    __tablename__ = "event_idempotency_keys"
    __table_args__ = (Index("ix_event_idempotency_keys_created", "created_at"),)

    client_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    response: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
