"""A delivery's lease in a column of its own (`lease_until`), so that claiming writes no indexed
column: on PostgreSQL a claim becomes a HOT update, with no new entry in any of the queue's
indexes, given room in the row's page (fill factor 50 from now on; pages written before keep
theirs until the queue turns over).

Until this revision a claim pushed `next_attempt_at` to the end of the lease. Deliveries held
at upgrade time keep that meaning: their lease end is copied to `lease_until`, so they stay
held until it passes. Workers of an earlier release still push `next_attempt_at` and cannot see
leases taken this way: stop them before starting workers of this one (docs/operations.md).

Revision ID: 0007_delivery_leases
Revises: 0006_sqlite_ids_never_reused
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_delivery_leases"
down_revision: str | None = "0006_sqlite_ids_never_reused"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("deliveries", sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE deliveries SET lease_until = next_attempt_at WHERE claim_token IS NOT NULL")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE deliveries SET (fillfactor = 50)")


def downgrade() -> None:
    # Held deliveries go back to the earlier meaning: due again when their lease ends.
    op.execute(
        "UPDATE deliveries SET next_attempt_at = lease_until"
        " WHERE claim_token IS NOT NULL AND lease_until > next_attempt_at"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE deliveries RESET (fillfactor)")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("lease_until")
