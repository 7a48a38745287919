"""The outbox: events, one delivery per (event, webhook), one result per attempt."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from tucano.db.base import NEVER_REUSED_IDS, Base, BigIntPK, UTCDateTime


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (Index("ix_events_customer_created", "customer_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    event_type: Mapped[str] = mapped_column(String(40))
    # The exact JSON body every delivery of this event sends (and signs), fixed at publish time.
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


# The two queues of pending deliveries, each with its partial index (see Delivery.__table_args__).
FIRST_ATTEMPT_QUEUE = "attempts = 0"
RETRY_QUEUE = "attempts > 0"


class Delivery(Base):
    """One event on its way to one webhook: the queue of work still to do. `next_attempt_at` is
    when it is due; a worker that claims it sets `lease_until` (with its `claim_token`), and until
    then no other worker takes it, so a delivery whose worker died becomes due again by itself.
    When its last attempt is recorded (success, the schedule exhausted, or cancelled) the row
    goes: the attempts stay in the results, and the queue holds only what is pending.

    A claim writes no indexed column, so on PostgreSQL it is a HOT update (no new index entries),
    as long as the row's page has room for the new version: hence a fill factor of 50 for this
    short-lived table."""

    __tablename__ = "deliveries"
    __table_args__ = (
        # Claiming: first attempts and retries are queued apart so retries cannot starve new events.
        Index(
            "ix_deliveries_due_first",
            "next_attempt_at",
            postgresql_where=text(FIRST_ATTEMPT_QUEUE),
            sqlite_where=text(FIRST_ATTEMPT_QUEUE),
        ),
        Index(
            "ix_deliveries_due_retry",
            "next_attempt_at",
            postgresql_where=text(RETRY_QUEUE),
            sqlite_where=text(RETRY_QUEUE),
        ),
        Index("ix_deliveries_event", "event_id"),
        Index("ix_deliveries_webhook", "webhook_id"),
        {**NEVER_REUSED_IDS, "postgresql_with": {"fillfactor": 50}},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(40), ForeignKey("events.id", ondelete="CASCADE"))
    webhook_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("webhooks.id", ondelete="CASCADE")
    )
    customer_id: Mapped[int] = mapped_column(BigInteger)
    attempts: Mapped[int] = mapped_column(Integer)  # made so far
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set by the claim; an outcome is applied only by the worker still holding this token.
    claim_token: Mapped[str | None] = mapped_column(String(32))
    # Set by the claim: no other worker claims the delivery before this time.
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ResultStatus:
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    PENDING_RETRY = "PENDING_RETRY"
    EXHAUSTED = "EXHAUSTED"

    ALL = (SUCCESS, FAILED, PENDING_RETRY, EXHAUSTED)


class DeliveryResult(Base):
    """One attempt, as the results list (A6) shows it. Denormalised on purpose: it outlives the
    webhook (history stays readable after a delete) and is filtered without joins."""

    __tablename__ = "delivery_results"
    __table_args__ = (
        Index("ix_delivery_results_customer_time", "customer_id", "attempted_at", "id"),
        Index("ix_delivery_results_webhook_time", "customer_id", "webhook_id", "attempted_at"),
        Index("ix_delivery_results_type_time", "customer_id", "event_type", "attempted_at"),
        Index("ix_delivery_results_status_time", "customer_id", "status", "attempted_at"),
        Index("ix_delivery_results_attempted", "attempted_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(BigInteger)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    webhook_id: Mapped[int] = mapped_column(BigInteger)
    event_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(40))
    target_url: Mapped[str] = mapped_column(String(2048))
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    http_status: Mapped[int | None] = mapped_column(Integer)
    response_body: Mapped[str | None] = mapped_column(Text)
    error_message: Mapped[str | None] = mapped_column(String(500))
    duration_ms: Mapped[int] = mapped_column(Integer)
    attempted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class CancelledDelivery(Base):
    """A delivery that a worker held under its lease when its webhook was deleted. The deletion
    leaves its last record to that worker (it may be sending it); this row is what lets the
    record still be made if the worker never makes it (killed while holding it): once the lease
    has run out with a margin, a periodic job records it as cancelled with its outcome unknown,
    unless a record of that attempt exists by then. See record_abandoned_cancellations."""

    __tablename__ = "cancelled_deliveries"
    __table_args__ = (Index("ix_cancelled_deliveries_lease", "lease_until"),)

    delivery_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    webhook_id: Mapped[int] = mapped_column(BigInteger)
    event_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(40))
    target_url: Mapped[str] = mapped_column(String(2048))
    attempt: Mapped[int] = mapped_column(Integer)  # the one the holder was to make
    claimed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime] = mapped_column(UTCDateTime)


class DeliveryResultCount(Base):
    """How many results a customer has in one hour, per webhook, event type and status: what
    the results list adds up instead of counting its rows (see deliveries/result_counts.py).
    Appended as results are recorded and pruned, and folded into one row per key."""

    __tablename__ = "delivery_result_counts"
    __table_args__ = (
        Index("ix_delivery_result_counts_customer_hour", "customer_id", "hour"),
        Index(
            "ix_delivery_result_counts_unfolded",
            "id",
            postgresql_where=text("NOT folded"),
            sqlite_where=text("folded = 0"),  # as SQLAlchemy writes `not folded` there
        ),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    customer_id: Mapped[int] = mapped_column(BigInteger)
    hour: Mapped[int] = mapped_column(BigInteger)  # hours since 1970-01-01T00:00Z
    webhook_id: Mapped[int] = mapped_column(BigInteger)
    event_type: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(16))
    result_count: Mapped[int] = mapped_column(BigInteger)
    folded: Mapped[bool] = mapped_column(Boolean)
