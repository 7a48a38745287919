"""A merchant's profile: what a payer's checkout page and BR Code say about who is paid."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import Base, UTCDateTime


class MerchantProfile(Base):
    """Set by the operator (`tucano customers set`), one per customer."""

    __tablename__ = "merchant_profiles"

    customer_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    merchant_name: Mapped[str] = mapped_column(String(100))
    merchant_city: Mapped[str] = mapped_column(String(60))
    # Without one, production offers no PIX.
    pix_key: Mapped[str | None] = mapped_column(String(77))
    mcc: Mapped[str] = mapped_column(String(4))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
