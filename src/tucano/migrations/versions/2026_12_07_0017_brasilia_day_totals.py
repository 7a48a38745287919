"""Day totals of payment links keyed by the Brasília day of creation (`America/Sao_Paulo`), as a
report's `byDay` counts them (decisions.md), instead of the UTC day: counted again from the links
(the unfolded changes too, which the links already hold). The downgrade counts them by UTC day.

Stop every process of the earlier release first: one still running would add changes keyed by
the UTC day after this migration.

Revision ID: 0017_brasilia_day_totals
Revises: 0016_secrets_at_rest
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from alembic import op

revision: str = "0017_brasilia_day_totals"
down_revision: str | None = "0016_secrets_at_rest"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = ("customer_id", "day", "expiration_days", "status", "payment_method")
_BRASILIA = ZoneInfo("America/Sao_Paulo")
# Written out, as a migration must not change with later app code (db.engines registers the
# same function for the service's own connections).
_SQLITE_FUNCTION = "brasilia_day"


def _brasilia_day_of_text(stored: str | None) -> str | None:
    if stored is None:
        return None
    moment = datetime.fromisoformat(stored)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(_BRASILIA).date().isoformat()


def _count_again(day: str) -> None:
    op.execute("DELETE FROM payment_link_day_changes")
    op.execute("DELETE FROM payment_link_day_totals")
    op.execute(
        f"""
        INSERT INTO payment_link_day_totals ({", ".join(KEY)}, link_count, amount_cents)
        SELECT l.customer_id, {day}, l.expiration_days, l.status, coalesce(p.method, 0),
               count(*), sum(l.amount_cents)
          FROM payment_links AS l
          LEFT JOIN payment_link_payments AS p ON p.link_id = l.id
         GROUP BY l.customer_id, {day}, l.expiration_days, l.status, coalesce(p.method, 0)
        """  # noqa: S608 - no input in the text
    )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _count_again("date(timezone('America/Sao_Paulo', l.created_at))")
        return
    # SQLite has no time-zone database: Python's, for this connection.
    bind.connection.dbapi_connection.create_function(  # type: ignore[union-attr]
        _SQLITE_FUNCTION, 1, _brasilia_day_of_text, deterministic=True
    )
    _count_again(f"{_SQLITE_FUNCTION}(l.created_at)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _count_again("date(timezone('UTC', l.created_at))")
    else:
        _count_again("date(l.created_at)")  # SQLite keeps UTC text
