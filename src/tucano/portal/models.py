"""Merchant portal sessions: what a session URL opens, kept as hashes of its secrets only."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime


class PortalSession(Base):
    """One session URL of a customer's portal: its one-time start token until a browser uses it,
    then the session cookie that browser holds, both until `expires_at`. Only SHA-256 hashes of
    the token and of the cookie are kept (each is 256 random bits), so neither can be read back
    from the database."""

    __tablename__ = "portal_sessions"
    __table_args__ = (
        Index("ix_portal_sessions_start_token_hash", "start_token_hash", unique=True),
        Index("ix_portal_sessions_cookie_hash", "cookie_hash", unique=True),
        Index("ix_portal_sessions_expires_at", "expires_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    read_only: Mapped[bool] = mapped_column(Boolean)
    # pt-BR or en; None: the browser's Accept-Language decides.
    locale: Mapped[str | None] = mapped_column(String(5))
    start_token_hash: Mapped[str] = mapped_column(String(64))
    # Set when the start token is used: the session cookie's hash.
    cookie_hash: Mapped[str | None] = mapped_column(String(64))
    # The API client that asked for the URL; None for the operator's `tucano portal url`.
    client_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Signed out: the cookie opens nothing from then on.
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
