"""API clients: the credentials a customer (or the provider's own systems) exchange for tokens."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime


class ApiClient(Base):
    __tablename__ = "api_clients"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64), unique=True)
    # sha256 of the secret: client secrets are 256 random bits, so a slow password hash buys
    # nothing and would slow every token request.
    secret_hash: Mapped[str] = mapped_column(String(128))
    customer_id: Mapped[int] = mapped_column(BigInteger, index=True)
    partner_id: Mapped[int | None] = mapped_column(BigInteger)
    scopes: Mapped[str] = mapped_column(String(512))
    name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set by `tucano clients revoke`: no more tokens, and those issued stop working.
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class InstanceSecret(Base):
    """Secrets the service makes for itself (the sandbox signing key, when none is configured)."""

    __tablename__ = "instance_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
