"""Payment links, their payments, and the idempotency keys of their creation."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from uuid import UUID

from sqlalchemy import (
    BigInteger,
    Date,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime

# Due sandbox auto-payments (see PaymentLink.autopay_at): the partial index's condition.
AUTOPAY_DUE = "autopay_at IS NOT NULL"
# Open links whose expiry has not been announced by an event yet: the partial index's condition.
EXPIRY_UNANNOUNCED = "status = 'CREATED' AND expiry_announced_at IS NULL"
# Refunds still waiting for their final state.
REFUND_PENDING = "status = 'PENDING'"


class PaymentLink(Base):
    __tablename__ = "payment_links"
    __table_args__ = (
        # Every list and report is a customer's links in a creationDate range, newest first; on
        # PostgreSQL the index also carries what counts and totals need (index-only scans).
        Index(
            "ix_payment_links_customer_created",
            "customer_id",
            "created_at",
            "id",
            postgresql_include=["status", "expires_at", "amount_cents"],
        ),
        Index(
            "ix_payment_links_customer_document", "customer_id", "registration_number", "created_at"
        ),
        Index("ix_payment_links_customer_reference", "customer_id", "user_reference", "created_at"),
        Index("ix_payment_links_customer_status", "customer_id", "status", "created_at"),
        Index(
            "ix_payment_links_autopay",
            "autopay_at",
            postgresql_where=text(AUTOPAY_DUE),
            sqlite_where=text(AUTOPAY_DUE),
        ),
        # A PIX payment names its link by txid alone (with the customer it is published for).
        Index("ix_payment_links_pix_txid", "pix_txid", unique=True),
        Index(
            "ix_payment_links_expiry_unannounced",
            "expires_at",
            postgresql_where=text(EXPIRY_UNANNOUNCED),
            sqlite_where=text(EXPIRY_UNANNOUNCED),
        ),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    uuid: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    payer_name: Mapped[str] = mapped_column(String(100))
    registration_number: Mapped[str] = mapped_column(String(14))
    amount_cents: Mapped[int] = mapped_column(BigInteger)
    numbers_installments: Mapped[int] = mapped_column(Integer)
    description: Mapped[str | None] = mapped_column(String(140))
    user_reference: Mapped[str | None] = mapped_column(String(77))
    expiration_days: Mapped[int] = mapped_column(Integer)
    verification_token: Mapped[int] = mapped_column(Integer)
    # CREATED, PAID, CANCELLED or REFUNDED; EXPIRED is not stored but read from expires_at at
    # the moment of reading.
    status: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Sandbox only: when the automatic PIX payment is due (amounts ending in 01 cents).
    autopay_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The txid of the link's BR Code, which a PIX payment of it reports. Every link has one
    # since migration 0015; nullable because SQLite adds no NOT NULL column to a filled table.
    pix_txid: Mapped[str] = mapped_column(String(25), nullable=True)
    # What its SUCCEEDED refunds gave back, and how many refunds (of any status) it has: a
    # reader asks for the refunds only of a link that has some.
    refunded_cents: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    refund_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # When its PAYMENT_LINK_INBOUND of status EXPIRED was published (once, by a job).
    expiry_announced_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Payment(Base):
    """The one payment of a paid link."""

    __tablename__ = "payment_link_payments"
    __table_args__ = (
        Index("ix_payment_link_payments_customer_receipt", "customer_id", "payment_receipt"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    link_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("payment_links.id", ondelete="CASCADE"), unique=True
    )
    customer_id: Mapped[int] = mapped_column(BigInteger)
    method: Mapped[int] = mapped_column(Integer)  # 1 credit card, 2 PIX
    payment_id: Mapped[str] = mapped_column(String(40))
    payment_receipt: Mapped[str] = mapped_column(String(40))
    installments: Mapped[int] = mapped_column(Integer)
    amount_cents: Mapped[int] = mapped_column(BigInteger)
    # Card charges: the cents of each instalment, comma-separated (they add up to amount_cents).
    installment_cents: Mapped[str | None] = mapped_column(Text)
    paid_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Refund(Base):
    """Money given back of a paid link, in full or in part: PENDING until the card processor
    or the Pix provider says SUCCEEDED or FAILED. Its x-transaction-id is kept with it, so the
    same request never refunds twice."""

    __tablename__ = "payment_link_refunds"
    __table_args__ = (
        UniqueConstraint("customer_id", "idempotency_key", name="uq_payment_link_refunds_key"),
        Index("ix_payment_link_refunds_link_id", "link_id"),
        Index(
            "ix_payment_link_refunds_pending",
            "next_attempt_at",
            postgresql_where=text(REFUND_PENDING),
            sqlite_where=text(REFUND_PENDING),
        ),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    uuid: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    link_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("payment_links.id", ondelete="CASCADE")
    )
    customer_id: Mapped[int] = mapped_column(BigInteger)
    method: Mapped[int] = mapped_column(Integer)  # the payment's: 1 credit card, 2 PIX
    amount_cents: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str | None] = mapped_column(String(140))
    status: Mapped[str] = mapped_column(String(9))  # PENDING, SUCCEEDED or FAILED
    failure_reason: Mapped[str | None] = mapped_column(String(300))
    # The Pix devolution's own end-to-end id (rtrId), once the Pix provider gives it.
    devolution_id: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # While PENDING: when the refund is next asked for, or about (a lease meanwhile).
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(300))
    idempotency_key: Mapped[UUID] = mapped_column(Uuid)
    request_hash: Mapped[str] = mapped_column(String(64))
    # The first answer sent for it, replayed to a request with the same x-transaction-id.
    answer: Mapped[str | None] = mapped_column(Text)


class IdempotencyKey(Base):
    """An x-transaction-id used to create a link: replayed for 24 hours, per customer."""

    __tablename__ = "payment_link_idempotency_keys"
    __table_args__ = (
        UniqueConstraint(
            "customer_id", "key", name="uq_payment_link_idempotency_keys_customer_key"
        ),
        Index("ix_payment_link_idempotency_keys_created", "created_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    key: Mapped[uuid.UUID] = mapped_column(Uuid)
    request_hash: Mapped[str] = mapped_column(String(64))
    response: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class LinkDayTotal(Base):
    """How many links a customer created on a Brasília day, and for how much, by validity, stored
    status and payment method: what lists count and reports add up instead of every link.
    Kept exact by compacting LinkDayChange rows into it; a reader adds both."""

    __tablename__ = "payment_link_day_totals"

    customer_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    expiration_days: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    # CREATED, PAID, CANCELLED or REFUNDED (as stored on the link).
    status: Mapped[str] = mapped_column(String(10), primary_key=True)
    payment_method: Mapped[int] = mapped_column(SmallInteger, primary_key=True)  # 0: not paid
    link_count: Mapped[int] = mapped_column(BigInteger)
    amount_cents: Mapped[int] = mapped_column(BigInteger)


class LinkDayChange(Base):
    """A change to a LinkDayTotal, written in the transaction that makes it (a create adds one,
    a payment moves one): an insert, so writers never wait on each other for a total's row.
    A periodic job folds them into the totals."""

    __tablename__ = "payment_link_day_changes"
    __table_args__ = (
        Index("ix_payment_link_day_changes_customer_day", "customer_id", "day"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    day: Mapped[date] = mapped_column(Date)
    expiration_days: Mapped[int] = mapped_column(SmallInteger)
    status: Mapped[str] = mapped_column(String(10))
    payment_method: Mapped[int] = mapped_column(SmallInteger)
    link_count: Mapped[int] = mapped_column(Integer)
    amount_cents: Mapped[int] = mapped_column(BigInteger)
