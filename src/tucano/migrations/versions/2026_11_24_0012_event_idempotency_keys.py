"""Idempotency keys of POST /internal/v1/events: a publisher that retries with the same
Idempotency-Key gets the first answer again instead of a second event.

Revision ID: 0012_event_idempotency_keys
Revises: 0011_recount_cancelled_results
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_event_idempotency_keys"
down_revision: str | None = "0011_recount_cancelled_results"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_idempotency_keys",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("client_id", "key", name=op.f("pk_event_idempotency_keys")),
    )
    op.create_index("ix_event_idempotency_keys_created", "event_idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_event_idempotency_keys_created", table_name="event_idempotency_keys")
    op.drop_table("event_idempotency_keys")
