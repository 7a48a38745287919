"""The queue on NATS's two statements on PostgreSQL, one round trip each, in autocommit, as the
database queue's claim is (postgres.py): the relay's mark of what is due, and a worker's claim of
the deliveries its tickets name, by primary key. `TUCANO_QUEUE=nats` runs on PostgreSQL only."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tucano.db.database import Database
from tucano.db.postgres import driver_connection
from tucano.deliveries.queue.postgres import CLAIMED_ROWS, DUE_SHARES

# $1 now, $2 retries' share, $3 limit, $4 until, $5 webhooks left out (none), $6 the mark,
# $7 hosts left out (none).
_MARK = f"""{DUE_SHARES}, marked AS (
    UPDATE deliveries AS d
       SET lease_until = $4, claim_token = $6, updated_at = $1
     WHERE d.id IN (SELECT id FROM retry UNION ALL SELECT id FROM fresh)
    RETURNING d.id, d.attempts, d.webhook_id
)
SELECT m.id, m.attempts, m.webhook_id, w.target_url
  FROM marked AS m
  LEFT JOIN LATERAL (SELECT target_url FROM webhooks WHERE id = m.webhook_id LIMIT 1) AS w ON true
"""  # noqa: S608 - our own constants

# $1 the tickets' deliveries, $2 their marks (in the same order), $3 now, $4 until, $5 the claim's
# token. Locked in id order, as a webhook's deletion and a record lock them (no deadlock); a row
# whose mark is no longer the ticket's (claimed, recorded or marked again since) is left alone.
_CLAIM_TICKETS = f"""
WITH standing AS MATERIALIZED (
    SELECT d.id
      FROM (SELECT * FROM unnest($1::bigint[], $2::text[]) AS t(id, mark) ORDER BY id) AS t
     CROSS JOIN LATERAL (
        SELECT id, claim_token FROM deliveries WHERE id = t.id FOR UPDATE
     ) AS d
     WHERE d.claim_token = t.mark
), claimed AS (
    UPDATE deliveries AS d
       SET lease_until = $4, claim_token = $5, updated_at = $3
     WHERE d.id = ANY(ARRAY(SELECT id FROM standing))
    RETURNING d.id, d.event_id, d.webhook_id, d.customer_id, d.attempts
)
{CLAIMED_ROWS}"""  # noqa: S608 - our own constants


async def mark_due(
    database: Database, *, limit: int, retries: int, now: datetime, until: datetime, mark: str
) -> list[Any]:
    """Mark up to `limit` due deliveries nobody holds (retries up to `retries`) with `mark`
    until `until`: rows of (id, attempts, webhook_id, target_url)."""
    async with driver_connection(database) as connection:
        return list(await connection.fetch(_MARK, now, retries, limit, until, [], mark, []))


async def claim_tickets(
    database: Database,
    tickets: Sequence[tuple[int, str]],
    *,
    now: datetime,
    until: datetime,
    token: str,
) -> list[Any]:
    """Claim, under `token` until `until`, the deliveries of `tickets` (delivery, mark) whose
    mark still stands: their rows, as backend.claimed_delivery reads them."""
    if not tickets:
        return []
    async with driver_connection(database) as connection:
        return list(
            await connection.fetch(
                _CLAIM_TICKETS,
                [t[0] for t in tickets],
                [t[1] for t in tickets],
                now,
                until,
                token,
            )
        )
