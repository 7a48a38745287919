"""Every secret a rotation replaced keeps signing for its own 24 hours: the one previous secret
(`previous_secret`, `previous_secret_expires_at`) becomes a list, `previous_secrets`, a JSON
array of [secret, ISO 8601 end of grace], newest first. Before, a second rotation within 24
hours dropped the first replaced secret at once.

A previous secret still in its grace at upgrade time is carried over (an expired one is not).
Processes of an earlier release read the dropped columns: stop them before starting those of
this one (docs/operations.md).

Revision ID: 0008_previous_secrets
Revises: 0007_delivery_leases
Create Date: 2026-11-23
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0008_previous_secrets"
down_revision: str | None = "0007_delivery_leases"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _as_utc(stored: datetime | str) -> datetime:
    # PostgreSQL gives an aware datetime; SQLite the naive UTC text db.UTCDateTime stores.
    moment = datetime.fromisoformat(stored) if isinstance(stored, str) else stored
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    # clock.format_utc's format, written out: a migration must not change with later app code.
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _stored(moment: datetime, dialect: str) -> datetime | str:
    # As db.UTCDateTime stores it: naive UTC text on SQLite.
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f") if dialect == "sqlite" else moment


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("webhooks", sa.Column("previous_secrets", sa.Text(), nullable=True))
    now = datetime.now(UTC)
    rows = bind.execute(
        sa.text(
            "SELECT id, previous_secret, previous_secret_expires_at FROM webhooks"
            " WHERE previous_secret IS NOT NULL AND previous_secret_expires_at IS NOT NULL"
        )
    ).all()
    for webhook_id, secret, expires in rows:
        until = _as_utc(expires)
        if until > now:
            bind.execute(
                sa.text("UPDATE webhooks SET previous_secrets = :kept WHERE id = :id"),
                {"kept": json.dumps([[secret, _iso(until)]]), "id": webhook_id},
            )
    # Plain ALTER TABLE (SQLite has it since 3.35): no table rebuild, which on SQLite would
    # have to keep AUTOINCREMENT (migration 0006) by hand.
    op.execute("ALTER TABLE webhooks DROP COLUMN previous_secret")
    op.execute("ALTER TABLE webhooks DROP COLUMN previous_secret_expires_at")


def downgrade() -> None:
    # The newest replaced secret goes back to the single previous-secret columns.
    op.add_column("webhooks", sa.Column("previous_secret", sa.String(64), nullable=True))
    op.add_column(
        "webhooks",
        sa.Column("previous_secret_expires_at", sa.DateTime(timezone=True), nullable=True),
    )
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, previous_secrets FROM webhooks WHERE previous_secrets IS NOT NULL")
    ).all()
    for webhook_id, stored in rows:
        kept = json.loads(stored)
        if kept:
            secret, until = kept[0]
            moment = datetime.fromisoformat(until)
            bind.execute(
                sa.text(
                    "UPDATE webhooks SET previous_secret = :secret,"
                    " previous_secret_expires_at = :until WHERE id = :id"
                ),
                {"secret": secret, "until": _stored(moment, bind.dialect.name), "id": webhook_id},
            )
    op.execute("ALTER TABLE webhooks DROP COLUMN previous_secrets")
