"""The deliveries table holds only pending work: a finished delivery's row goes when its last
attempt is recorded (its attempts stay in delivery_results), so the status column goes too and
the two queues are told apart by attempts alone.

Revision ID: 0004_pending_deliveries
Revises: 0003_payment_links
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_pending_deliveries"
down_revision: str | None = "0003_payment_links"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)
OLD_QUEUES = {
    "ix_deliveries_due_first": "status = 'PENDING' AND attempts = 0",
    "ix_deliveries_due_retry": "status = 'PENDING' AND attempts > 0",
}
NEW_QUEUES = {
    "ix_deliveries_due_first": "attempts = 0",
    "ix_deliveries_due_retry": "attempts > 0",
}


def _create_queue_indexes(queues: dict[str, str]) -> None:
    for name, condition in queues.items():
        op.create_index(
            name,
            "deliveries",
            ["next_attempt_at"],
            postgresql_where=sa.text(condition),
            sqlite_where=sa.text(condition),
        )


def upgrade() -> None:
    op.execute("DELETE FROM deliveries WHERE status <> 'PENDING' OR next_attempt_at IS NULL")
    for name in OLD_QUEUES:
        op.drop_index(name, table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("status")
        batch.alter_column("next_attempt_at", existing_type=TIMESTAMP, nullable=False)
    _create_queue_indexes(NEW_QUEUES)


def downgrade() -> None:
    for name in NEW_QUEUES:
        op.drop_index(name, table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(
            sa.Column("status", sa.String(16), nullable=False, server_default="PENDING")
        )
        batch.alter_column("next_attempt_at", existing_type=TIMESTAMP, nullable=True)
    with op.batch_alter_table("deliveries") as batch:
        batch.alter_column("status", existing_type=sa.String(16), server_default=None)
    _create_queue_indexes(OLD_QUEUES)
