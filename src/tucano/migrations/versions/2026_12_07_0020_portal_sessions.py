"""Merchant portal sessions: the one-time start token and the session cookie, as hashes.

Revision ID: 0020_portal_sessions
Revises: 0019_link_lifecycle
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_portal_sessions"
down_revision: str | None = "0019_link_lifecycle"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "portal_sessions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("locale", sa.String(5), nullable=True),
        sa.Column("start_token_hash", sa.String(64), nullable=False),
        sa.Column("cookie_hash", sa.String(64), nullable=True),
        sa.Column("client_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_portal_sessions")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_portal_sessions_start_token_hash", "portal_sessions", ["start_token_hash"], unique=True
    )
    op.create_index(
        "ix_portal_sessions_cookie_hash", "portal_sessions", ["cookie_hash"], unique=True
    )
    op.create_index("ix_portal_sessions_expires_at", "portal_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_portal_sessions_expires_at", table_name="portal_sessions")
    op.drop_index("ix_portal_sessions_cookie_hash", table_name="portal_sessions")
    op.drop_index("ix_portal_sessions_start_token_hash", table_name="portal_sessions")
    op.drop_table("portal_sessions")
