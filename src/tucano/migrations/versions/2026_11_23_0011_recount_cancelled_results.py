"""Hour counts of delivery results counted again from the results. Deliveries cancelled when
their webhook was deleted or deactivated were recorded as FAILED results without their counts,
so the results list's totals missed them (fixed in deliveries.service.cancel_deliveries_to).

On PostgreSQL the old counts go and the new ones are made in one statement, so from one snapshot:
results a running worker records meanwhile are either in it (and counted here) or not (and
counted by that worker), never both.

Revision ID: 0011_recount_cancelled_results
Revises: 0010_sqlite_whole_seconds
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011_recount_cancelled_results"
down_revision: str | None = "0010_sqlite_whole_seconds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = "customer_id, hour, webhook_id, event_type, status, result_count, folded"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        hour = "floor(extract(epoch FROM attempted_at) / 3600)::bigint"
        op.execute(
            f"""
            WITH gone AS (DELETE FROM delivery_result_counts RETURNING 1)
            INSERT INTO delivery_result_counts ({COLUMNS})
            SELECT customer_id, {hour}, webhook_id, event_type, status, count(*), true
              FROM delivery_results
             GROUP BY customer_id, {hour}, webhook_id, event_type, status
            """  # noqa: S608 - no input in the text
        )
        return
    # SQLite keeps UTC text; its date functions round to the millisecond, so the fraction goes
    # first (10:59:59.9999 is hour 10). One writer at a time: the two statements are one change.
    hour = "CAST(strftime('%s', substr(attempted_at, 1, 19)) AS INTEGER) / 3600"
    op.execute("DELETE FROM delivery_result_counts")
    op.execute(
        f"""
        INSERT INTO delivery_result_counts ({COLUMNS})
        SELECT customer_id, {hour}, webhook_id, event_type, status, count(*), 1
          FROM delivery_results
         GROUP BY customer_id, {hour}, webhook_id, event_type, status
        """  # noqa: S608 - no input in the text
    )


def downgrade() -> None:
    pass  # the counts stay right under the earlier revision too
