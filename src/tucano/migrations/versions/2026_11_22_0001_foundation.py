"""Foundation: API clients, the instance's own secrets, webhooks.

Revision ID: 0001_foundation
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_foundation"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the app's column types: a migration must not change when the app code does.
BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_clients",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("secret_hash", sa.String(128), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("partner_id", sa.BigInteger(), nullable=True),
        sa.Column("scopes", sa.String(512), nullable=False),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_clients")),
        sa.UniqueConstraint("client_id", name=op.f("uq_api_clients_client_id")),
    )
    op.create_index(op.f("ix_api_clients_customer_id"), "api_clients", ["customer_id"])
    op.create_table(
        "instance_secrets",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.String(256), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_instance_secrets")),
    )
    op.create_table(
        "webhooks",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("partner_id", sa.BigInteger(), nullable=True),
        sa.Column("target_url", sa.String(2048), nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("secret", sa.String(64), nullable=False),
        sa.Column("previous_secret", sa.String(64), nullable=True),
        sa.Column("previous_secret_expires_at", TIMESTAMP, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_index(
        "ix_webhooks_customer_event_type", "webhooks", ["customer_id", "event_type", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_webhooks_customer_event_type", table_name="webhooks")
    op.drop_table("webhooks")
    op.drop_table("instance_secrets")
    op.drop_index(op.f("ix_api_clients_customer_id"), table_name="api_clients")
    op.drop_table("api_clients")
