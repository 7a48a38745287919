"""Payment links, their payments, and the idempotency keys of their creation.

Revision ID: 0003_payment_links
Revises: 0002_delivery_engine
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_payment_links"
down_revision: str | None = "0002_delivery_engine"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
AUTOPAY_DUE = "autopay_at IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "payment_links",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("uuid", sa.Uuid(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("payer_name", sa.String(100), nullable=False),
        sa.Column("registration_number", sa.String(14), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.Column("numbers_installments", sa.Integer(), nullable=False),
        sa.Column("description", sa.String(140), nullable=True),
        sa.Column("user_reference", sa.String(77), nullable=True),
        sa.Column("expiration_days", sa.Integer(), nullable=False),
        sa.Column("verification_token", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        sa.Column("autopay_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_links")),
        sa.UniqueConstraint("uuid", name=op.f("uq_payment_links_uuid")),
    )
    op.create_index(
        "ix_payment_links_customer_created",
        "payment_links",
        ["customer_id", "created_at", "id"],
        postgresql_include=["status", "expires_at", "amount_cents"],
    )
    op.create_index(
        "ix_payment_links_customer_document",
        "payment_links",
        ["customer_id", "registration_number", "created_at"],
    )
    op.create_index(
        "ix_payment_links_customer_reference",
        "payment_links",
        ["customer_id", "user_reference", "created_at"],
    )
    op.create_index(
        "ix_payment_links_customer_status", "payment_links", ["customer_id", "status", "created_at"]
    )
    op.create_index(
        "ix_payment_links_autopay",
        "payment_links",
        ["autopay_at"],
        postgresql_where=sa.text(AUTOPAY_DUE),
        sqlite_where=sa.text(AUTOPAY_DUE),
    )
    op.create_table(
        "payment_link_payments",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("link_id", sa.BigInteger(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("method", sa.Integer(), nullable=False),
        sa.Column("payment_id", sa.String(40), nullable=False),
        sa.Column("payment_receipt", sa.String(40), nullable=False),
        sa.Column("installments", sa.Integer(), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.Column("installment_cents", sa.Text(), nullable=True),
        sa.Column("paid_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["payment_links.id"],
            name=op.f("fk_payment_link_payments_link_id_payment_links"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_link_payments")),
        sa.UniqueConstraint("link_id", name=op.f("uq_payment_link_payments_link_id")),
    )
    op.create_index(
        "ix_payment_link_payments_customer_receipt",
        "payment_link_payments",
        ["customer_id", "payment_receipt"],
    )
    op.create_table(
        "payment_link_idempotency_keys",
        sa.Column("id", BIGINT_PK, nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.Uuid(), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_link_idempotency_keys")),
        sa.UniqueConstraint(
            "customer_id", "key", name="uq_payment_link_idempotency_keys_customer_key"
        ),
    )
    op.create_index(
        "ix_payment_link_idempotency_keys_created", "payment_link_idempotency_keys", ["created_at"]
    )


def downgrade() -> None:
    op.drop_table("payment_link_idempotency_keys")
    op.drop_table("payment_link_payments")
    op.drop_table("payment_links")
