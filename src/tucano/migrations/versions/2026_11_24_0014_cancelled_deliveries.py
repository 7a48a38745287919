"""Deliveries a worker held when their webhook was deleted, so that their last record is made
even if that worker never makes it (see models.CancelledDelivery).

Revision ID: 0014_cancelled_deliveries
Revises: 0013_api_client_revocation
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_cancelled_deliveries"
down_revision: str | None = "0013_api_client_revocation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cancelled_deliveries",
        sa.Column("delivery_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("webhook_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("target_url", sa.String(2048), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("delivery_id", name=op.f("pk_cancelled_deliveries")),
    )
    op.create_index("ix_cancelled_deliveries_lease", "cancelled_deliveries", ["lease_until"])


def downgrade() -> None:
    op.drop_index("ix_cancelled_deliveries_lease", table_name="cancelled_deliveries")
    op.drop_table("cancelled_deliveries")
