"""SQLite: ids are never handed out twice. Without AUTOINCREMENT SQLite gives a new row the
largest id in use plus one, so deleting the newest webhook gave its id to the next one created
(any customer's), and a deleted webhook's id then read another webhook and carried its history.
PostgreSQL's sequences never reuse ids; nothing changes there.

Each table with an integer id is rebuilt with `id INTEGER PRIMARY KEY AUTOINCREMENT` the way
SQLite documents for changes ALTER TABLE cannot make (create the new table, copy, drop, rename),
and its indexes are made again from their own stored SQL, partial ones included.

Revision ID: 0006_sqlite_ids_never_reused
Revises: 0005_payment_link_day_totals
Create Date: 2026-11-23
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from alembic import op

revision: str = "0006_sqlite_ids_never_reused"
down_revision: str | None = "0005_payment_link_day_totals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    "api_clients",
    "webhooks",
    "deliveries",
    "delivery_results",
    "payment_links",
    "payment_link_payments",
    "payment_link_idempotency_keys",
    "payment_link_day_changes",
)
# Ids other tables remember: the counter starts above them too, so that history recorded before
# this revision (a deleted webhook's results) never attaches to a new row.
REMEMBERED_ELSEWHERE = {
    "webhooks": ("delivery_results", "webhook_id"),
    "deliveries": ("delivery_results", "delivery_id"),
}
_ID_COLUMN = re.compile(r"\bid INTEGER NOT NULL,")
_PRIMARY_KEY = re.compile(r",\s*CONSTRAINT pk_\w+ PRIMARY KEY \(id\)")
# The table's name as stored: quoted when an earlier batch migration rebuilt it.
_TABLE_NAME = re.compile(r'^CREATE TABLE ("?)\w+\1 \(')


def _rebuild_with_autoincrement(table: str) -> None:
    bind = op.get_bind()
    create = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).scalar_one()
    if "AUTOINCREMENT" in create:
        return
    rebuilt, ids = _ID_COLUMN.subn("id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,", create, 1)
    rebuilt, keys = _PRIMARY_KEY.subn("", rebuilt, 1)
    staged = f"_rebuilt_{table}"
    rebuilt, names = _TABLE_NAME.subn(f"CREATE TABLE {staged} (", rebuilt, 1)
    if (ids, keys, names) != (1, 1, 1):
        raise RuntimeError(f"unexpected definition of table {table}: {create}")
    indexes = [
        row[0]
        for row in bind.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
            (table,),
        )
    ]
    columns = ", ".join(row[1] for row in bind.exec_driver_sql(f"PRAGMA table_info({table})"))
    bind.exec_driver_sql(rebuilt)
    # Copying the ids as they are also sets the table's AUTOINCREMENT counter to the largest.
    bind.exec_driver_sql(f"INSERT INTO {staged} ({columns}) SELECT {columns} FROM {table}")  # noqa: S608
    bind.exec_driver_sql(f"DROP TABLE {table}")
    bind.exec_driver_sql(f"ALTER TABLE {staged} RENAME TO {table}")
    for index in indexes:
        bind.exec_driver_sql(index)
    if table in REMEMBERED_ELSEWHERE:
        other, column = REMEMBERED_ELSEWHERE[table]
        remembered = bind.exec_driver_sql(
            f"SELECT coalesce(max({column}), 0) FROM {other}"  # noqa: S608
        ).scalar_one()
        counter = bind.exec_driver_sql(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
        ).scalar_one_or_none()
        if counter is None:
            bind.exec_driver_sql(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table, remembered)
            )
        elif remembered > counter:
            bind.exec_driver_sql(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (remembered, table)
            )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    # Dropping a table with foreign keys enforced would first delete its rows, and with them,
    # by ON DELETE CASCADE, every row that refers to them. Migrations run on a connection of
    # their own that never turns enforcement on; refuse to go on if that ever changes.
    if bind.exec_driver_sql("PRAGMA foreign_keys").scalar_one():
        raise RuntimeError("foreign keys must not be enforced while tables are rebuilt")
    for table in TABLES:
        _rebuild_with_autoincrement(table)


def downgrade() -> None:
    # Ids that are never reused are what every earlier revision wants too: nothing to undo.
    pass
