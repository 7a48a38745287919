"""Delivery engine: events, deliveries (the queue), delivery results, webhook delivery health.

Revision ID: 0002_delivery_engine
Revises: 0001_foundation
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_delivery_engine"
down_revision: str | None = "0001_foundation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
FIRST_ATTEMPTS = "status = 'PENDING' AND attempts = 0"
RETRIES = "status = 'PENDING' AND attempts > 0"


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("failing_since", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("last_success_at", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("deactivated_at", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("deactivation_reason", sa.String(300), nullable=True))

    op.create_table(
        "events",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_customer_created", "events", ["customer_id", "created_at"])

    op.create_table(
        "deliveries",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("webhook_id", sa.BigInteger(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=True),
        sa.Column("claim_token", sa.String(32), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_deliveries_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["webhook_id"],
            ["webhooks.id"],
            name=op.f("fk_deliveries_webhook_id_webhooks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    op.create_index(
        "ix_deliveries_due_first",
        "deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text(FIRST_ATTEMPTS),
        sqlite_where=sa.text(FIRST_ATTEMPTS),
    )
    op.create_index(
        "ix_deliveries_due_retry",
        "deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text(RETRIES),
        sqlite_where=sa.text(RETRIES),
    )
    op.create_index("ix_deliveries_event", "deliveries", ["event_id"])
    op.create_index("ix_deliveries_webhook", "deliveries", ["webhook_id"])

    op.create_table(
        "delivery_results",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("delivery_id", sa.BigInteger(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("webhook_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("target_url", sa.String(2048), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("error_message", sa.String(500), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("attempted_at", TIMESTAMP, nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_results")),
    )
    op.create_index(
        "ix_delivery_results_customer_time",
        "delivery_results",
        ["customer_id", "attempted_at", "id"],
    )
    op.create_index(
        "ix_delivery_results_webhook_time",
        "delivery_results",
        ["customer_id", "webhook_id", "attempted_at"],
    )
    op.create_index(
        "ix_delivery_results_type_time",
        "delivery_results",
        ["customer_id", "event_type", "attempted_at"],
    )
    op.create_index(
        "ix_delivery_results_status_time",
        "delivery_results",
        ["customer_id", "status", "attempted_at"],
    )
    op.create_index("ix_delivery_results_attempted", "delivery_results", ["attempted_at"])


def downgrade() -> None:
    op.drop_table("delivery_results")
    op.drop_table("deliveries")
    op.drop_table("events")
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("deactivation_reason")
        batch.drop_column("deactivated_at")
        batch.drop_column("last_success_at")
        batch.drop_column("failing_since")
