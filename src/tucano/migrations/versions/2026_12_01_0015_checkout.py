"""The checkout where the payer pays: merchant profiles, a PIX txid of its own per link (given
to every link already there), and the card attempts made on a checkout.

Revision ID: 0015_checkout
Revises: 0014_cancelled_deliveries
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_checkout"
down_revision: str | None = "0014_cancelled_deliveries"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 24 random hexadecimal characters (96 bits): within the BR Code's 25 of [A-Za-z0-9].
_TXIDS = {
    "postgresql": "UPDATE payment_links SET pix_txid = "
    "upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 24)) WHERE pix_txid IS NULL",
    "sqlite": "UPDATE payment_links SET pix_txid = hex(randomblob(12)) WHERE pix_txid IS NULL",
}


def upgrade() -> None:
    op.create_table(
        "merchant_profiles",
        sa.Column("customer_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("merchant_name", sa.String(100), nullable=False),
        sa.Column("merchant_city", sa.String(60), nullable=False),
        sa.Column("pix_key", sa.String(77), nullable=True),
        sa.Column("mcc", sa.String(4), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("customer_id", name=op.f("pk_merchant_profiles")),
    )
    op.add_column("payment_links", sa.Column("pix_txid", sa.String(25), nullable=True))
    op.execute(_TXIDS[op.get_bind().dialect.name])
    op.create_index("ix_payment_links_pix_txid", "payment_links", ["pix_txid"], unique=True)
    op.create_table(
        "checkout_card_attempts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("link_id", sa.BigInteger(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("refusal", sa.String(24), nullable=True),
        sa.Column("brand", sa.String(20), nullable=False),
        sa.Column("last4", sa.String(4), nullable=False),
        sa.Column("installments", sa.Integer(), nullable=False),
        sa.Column("nsu", sa.String(12), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("locks_until", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["payment_links.id"],
            name=op.f("fk_checkout_card_attempts_link_id_payment_links"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkout_card_attempts")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_checkout_card_attempts_link_started",
        "checkout_card_attempts",
        ["link_id", "started_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_checkout_card_attempts_link_started", table_name="checkout_card_attempts")
    op.drop_table("checkout_card_attempts")
    op.drop_index("ix_payment_links_pix_txid", table_name="payment_links")
    with op.batch_alter_table("payment_links") as batch:
        batch.drop_column("pix_txid")
    op.drop_table("merchant_profiles")
