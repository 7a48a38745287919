"""API clients can be revoked (`tucano clients revoke`): a revoked client gets no token, and the
tokens it holds stop working.

Revision ID: 0013_api_client_revocation
Revises: 0012_event_idempotency_keys
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_api_client_revocation"
down_revision: str | None = "0012_event_idempotency_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_clients") as table:
        table.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_clients") as table:
        table.drop_column("revoked_at")
