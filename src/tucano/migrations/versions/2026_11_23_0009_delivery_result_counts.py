"""Hour counts of delivery results (what the results list adds up instead of counting every
matching row; see deliveries/result_counts.py), filled from the results already there.

Revision ID: 0009_delivery_result_counts
Revises: 0008_previous_secrets
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_delivery_result_counts"
down_revision: str | None = "0008_previous_secrets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
KEY = ("customer_id", "hour", "webhook_id", "event_type", "status")


def upgrade() -> None:
    op.create_table(
        "delivery_result_counts",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("hour", sa.BigInteger(), nullable=False),
        sa.Column("webhook_id", sa.BigInteger(), nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("result_count", sa.BigInteger(), nullable=False),
        sa.Column("folded", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_result_counts")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_delivery_result_counts_customer_hour",
        "delivery_result_counts",
        ["customer_id", "hour"],
    )
    op.create_index(
        "ix_delivery_result_counts_unfolded",
        "delivery_result_counts",
        ["id"],
        postgresql_where=sa.text("NOT folded"),
        sqlite_where=sa.text("folded = 0"),
    )
    hour = (
        "floor(extract(epoch FROM attempted_at) / 3600)::bigint"
        if op.get_bind().dialect.name == "postgresql"
        # SQLite keeps UTC text; its date functions round to the millisecond, so the fraction
        # goes first (10:59:59.9999 is hour 10).
        else "CAST(strftime('%s', substr(attempted_at, 1, 19)) AS INTEGER) / 3600"
    )
    op.execute(
        f"""
        INSERT INTO delivery_result_counts ({", ".join(KEY)}, result_count, folded)
        SELECT customer_id, {hour}, webhook_id, event_type, status, count(*), true
          FROM delivery_results
         GROUP BY customer_id, {hour}, webhook_id, event_type, status
        """  # noqa: S608 - no input in the text
    )


def downgrade() -> None:
    op.drop_index("ix_delivery_result_counts_unfolded", table_name="delivery_result_counts")
    op.drop_index("ix_delivery_result_counts_customer_hour", table_name="delivery_result_counts")
    op.drop_table("delivery_result_counts")
