"""A payment link's charge at the merchant's PSP (the `api-pix` provider): one per link, made
after the link's commit by a job, so a link never waits for the PSP."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime

# A charge's life here: PENDING until the PSP has it (retried), ACTIVE while it can be paid,
# then PAID, WITHDRAWN (the link expired or was cancelled) or FAILED (the PSP refused it).
PENDING = "PENDING"
ACTIVE = "ACTIVE"
PAID = "PAID"
WITHDRAWN = "WITHDRAWN"
FAILED = "FAILED"


class PixCharge(Base):
    __tablename__ = "pix_charges"
    __table_args__ = (
        Index("ix_pix_charges_link_id", "link_id", unique=True),
        Index("ix_pix_charges_txid", "txid", unique=True),
        Index("ix_pix_charges_status_due", "status", "next_attempt_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    link_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("payment_links.id", ondelete="CASCADE")
    )
    customer_id: Mapped[int] = mapped_column(BigInteger)
    txid: Mapped[str] = mapped_column(String(35))  # 26 to 35 of [a-zA-Z0-9], the PSP's key
    status: Mapped[str] = mapped_column(String(10))
    pix_copia_e_cola: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # When the reconciliation last asked the PSP about it.
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
