"""Card payment attempts made on a link's checkout: brand and last four digits only, never the
card number or its security code."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime


class CardAttempt(Base):
    """One card submitted on a checkout: PENDING while the processor answers, then APPROVED,
    REFUSED (with the processor's reason) or VOIDED (approved after the link was paid some
    other way, and cancelled). Refusals lock card payment of the link (see card_payments)."""

    __tablename__ = "checkout_card_attempts"
    __table_args__ = (
        Index("ix_checkout_card_attempts_link_started", "link_id", "started_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    link_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("payment_links.id", ondelete="CASCADE")
    )
    customer_id: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(10))
    refusal: Mapped[str | None] = mapped_column(String(24))
    brand: Mapped[str] = mapped_column(String(20))
    last4: Mapped[str] = mapped_column(String(4))
    installments: Mapped[int] = mapped_column(Integer)
    nsu: Mapped[str | None] = mapped_column(String(12))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Set on the refusal that locks card payment of the link: until when.
    locks_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
