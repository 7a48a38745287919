"""Refunds, cancellation and the link's lifecycle: links may be CANCELLED or REFUNDED, keep what
was refunded and when their expiry was announced; refunds get a table.

Links already expired when this runs count as announced: their EXPIRED event would otherwise
arrive days late, all at once.

Revision ID: 0019_link_lifecycle
Revises: 0018_pix_charges
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_link_lifecycle"
down_revision: str | None = "0018_pix_charges"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EXPIRY_UNANNOUNCED = "status = 'CREATED' AND expiry_announced_at IS NULL"
REFUND_PENDING = "status = 'PENDING'"
# Each table whose status column widens, and whether its ids must stay never reused on SQLite.
STATUS_TABLES = {
    "payment_link_day_totals": False,
    "payment_link_day_changes": True,
    "payment_links": True,
}


def upgrade() -> None:
    bind = op.get_bind()
    # SQLite copies each table to change a column's type; dropping the old one with foreign
    # keys enforced would delete, by ON DELETE CASCADE, every row that refers to its rows.
    if bind.dialect.name == "sqlite" and bind.exec_driver_sql("PRAGMA foreign_keys").scalar_one():
        raise RuntimeError("foreign keys must not be enforced while tables are rebuilt")
    # CANCELLED has nine letters.
    for table, never_reused in STATUS_TABLES.items():
        with op.batch_alter_table(
            table, table_kwargs={"sqlite_autoincrement": True} if never_reused else {}
        ) as batch:
            batch.alter_column("status", type_=sa.String(10), existing_nullable=False)
    with op.batch_alter_table("payment_links") as batch:
        batch.add_column(
            sa.Column("refunded_cents", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("refund_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(
            sa.Column("expiry_announced_at", sa.DateTime(timezone=True), nullable=True)
        )
    op.execute(
        "UPDATE payment_links SET expiry_announced_at = expires_at "
        "WHERE status = 'CREATED' AND expires_at <= CURRENT_TIMESTAMP"
    )
    op.create_index(
        "ix_payment_links_expiry_unannounced",
        "payment_links",
        ["expires_at"],
        postgresql_where=sa.text(EXPIRY_UNANNOUNCED),
        sqlite_where=sa.text(EXPIRY_UNANNOUNCED),
    )
    op.create_table(
        "payment_link_refunds",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("uuid", sa.Uuid(), nullable=False),
        sa.Column("link_id", sa.BigInteger(), nullable=False),
        sa.Column("customer_id", sa.BigInteger(), nullable=False),
        sa.Column("method", sa.Integer(), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(140), nullable=True),
        sa.Column("status", sa.String(9), nullable=False),
        sa.Column("failure_reason", sa.String(300), nullable=True),
        sa.Column("devolution_id", sa.String(40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(300), nullable=True),
        sa.Column("idempotency_key", sa.Uuid(), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["payment_links.id"],
            name=op.f("fk_payment_link_refunds_link_id_payment_links"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_link_refunds")),
        sa.UniqueConstraint("uuid", name=op.f("uq_payment_link_refunds_uuid")),
        sa.UniqueConstraint("customer_id", "idempotency_key", name="uq_payment_link_refunds_key"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_payment_link_refunds_link_id", "payment_link_refunds", ["link_id"])
    op.create_index(
        "ix_payment_link_refunds_pending",
        "payment_link_refunds",
        ["next_attempt_at"],
        postgresql_where=sa.text(REFUND_PENDING),
        sqlite_where=sa.text(REFUND_PENDING),
    )


def downgrade() -> None:
    op.drop_index("ix_payment_link_refunds_pending", table_name="payment_link_refunds")
    op.drop_index("ix_payment_link_refunds_link_id", table_name="payment_link_refunds")
    op.drop_table("payment_link_refunds")
    op.drop_index("ix_payment_links_expiry_unannounced", table_name="payment_links")
    with op.batch_alter_table("payment_links") as batch:
        batch.drop_column("expiry_announced_at")
        batch.drop_column("cancelled_at")
        batch.drop_column("refund_count")
        batch.drop_column("refunded_cents")
