"""Charges at the merchant's PSP for the `api-pix` Pix provider: one per payment link.

Revision ID: 0018_pix_charges
Revises: 0017_brasilia_day_totals
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_pix_charges"
down_revision: str | None = "0017_brasilia_day_totals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pix_charges",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("link_id", sa.BigInteger(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("txid", sa.String(35), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("pix_copia_e_cola", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.String(300), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["payment_links.id"],
            name=op.f("fk_pix_charges_link_id_payment_links"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pix_charges")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_pix_charges_link_id", "pix_charges", ["link_id"], unique=True)
    op.create_index("ix_pix_charges_txid", "pix_charges", ["txid"], unique=True)
    op.create_index("ix_pix_charges_status_due", "pix_charges", ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_pix_charges_status_due", table_name="pix_charges")
    op.drop_index("ix_pix_charges_txid", table_name="pix_charges")
    op.drop_index("ix_pix_charges_link_id", table_name="pix_charges")
    op.drop_table("pix_charges")
