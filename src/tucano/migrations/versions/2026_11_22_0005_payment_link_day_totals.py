"""Day totals of payment links (what lists count and reports add up at scale), and the changes
that feed them; filled from the links already there.

Revision ID: 0005_payment_link_day_totals
Revises: 0004_pending_deliveries
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_payment_link_day_totals"
down_revision: str | None = "0004_pending_deliveries"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
KEY = ("customer_id", "day", "expiration_days", "status", "payment_method")


def _key_columns(primary: bool) -> list[sa.Column[object]]:
    return [
        sa.Column("customer_id", sa.BigInteger(), nullable=False, primary_key=primary),
        sa.Column("day", sa.Date(), nullable=False, primary_key=primary),
        sa.Column("expiration_days", sa.SmallInteger(), nullable=False, primary_key=primary),
        sa.Column("status", sa.String(8), nullable=False, primary_key=primary),
        sa.Column("payment_method", sa.SmallInteger(), nullable=False, primary_key=primary),
    ]


def upgrade() -> None:
    op.create_table(
        "payment_link_day_totals",
        *_key_columns(primary=True),
        sa.Column("link_count", sa.BigInteger(), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(*KEY, name=op.f("pk_payment_link_day_totals")),
    )
    op.create_table(
        "payment_link_day_changes",
        sa.Column("id", BIGINT_PK, nullable=False),
        *_key_columns(primary=False),
        sa.Column("link_count", sa.Integer(), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_link_day_changes")),
    )
    op.create_index(
        "ix_payment_link_day_changes_customer_day",
        "payment_link_day_changes",
        ["customer_id", "day"],
    )
    utc_day = (
        "date(timezone('UTC', l.created_at))"
        if op.get_bind().dialect.name == "postgresql"
        else "date(l.created_at)"  # SQLite keeps UTC text
    )
    op.execute(
        f"""
        INSERT INTO payment_link_day_totals ({", ".join(KEY)}, link_count, amount_cents)
        SELECT l.customer_id, {utc_day}, l.expiration_days, l.status, coalesce(p.method, 0),
               count(*), sum(l.amount_cents)
          FROM payment_links AS l
          LEFT JOIN payment_link_payments AS p ON p.link_id = l.id
         GROUP BY l.customer_id, {utc_day}, l.expiration_days, l.status, coalesce(p.method, 0)
        """  # noqa: S608 - no input in the text
    )


def downgrade() -> None:
    op.drop_index("ix_payment_link_day_changes_customer_day", table_name="payment_link_day_changes")
    op.drop_table("payment_link_day_changes")
    op.drop_table("payment_link_day_totals")
