"""SQLite: timestamps at a whole second written without their ".000000". The hot paths (the
outbox, claims, results, webhook health) handed datetimes to the driver, whose default adapter
drops the fraction at a whole second, where SQLAlchemy's statements write it: text compared, such
a timestamp sorted before the same instant written by a statement. The adapter is fixed (db.py);
this gives rows written before the fix the one format. Nothing to do on PostgreSQL.

Revision ID: 0010_sqlite_whole_seconds
Revises: 0009_delivery_result_counts
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010_sqlite_whole_seconds"
down_revision: str | None = "0009_delivery_result_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every timestamp column at this revision.
TIMESTAMPS = {
    "api_clients": ("created_at",),
    "delivery_results": ("attempted_at", "next_attempt_at"),
    "events": ("created_at",),
    "instance_secrets": ("created_at",),
    "payment_link_idempotency_keys": ("created_at",),
    "payment_links": ("created_at", "expires_at", "autopay_at"),
    "webhooks": ("created_at", "updated_at", "failing_since", "last_success_at", "deactivated_at"),
    "deliveries": ("next_attempt_at", "lease_until", "created_at", "updated_at"),
    "payment_link_payments": ("paid_at",),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, columns in TIMESTAMPS.items():
        for column in columns:
            # "YYYY-MM-DD HH:MM:SS" is 19 characters; with its fraction, 26.
            op.execute(
                f"UPDATE {table} SET {column} = {column} || '.000000'"  # noqa: S608 - our names
                f" WHERE length({column}) = 19"
            )


def downgrade() -> None:
    pass  # the longer form reads the same everywhere
