"""The delivery queue on PostgreSQL: a claim and a record are one statement each, run through
asyncpg in autocommit, each batch travelling as one array or JSON parameter (why, and what it
saves: docs/adr/delivery-queue.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import orjson
import structlog

from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.db.outages import is_database_unavailable
from tucano.deliveries import result_counts
from tucano.deliveries.health import DeliveryHealth, record_delivery_health_on_postgres
from tucano.deliveries.models import FIRST_ATTEMPT_QUEUE, RETRY_QUEUE, ResultStatus
from tucano.deliveries.queue.backend import (
    CLAIMED_COLUMNS,
    NOT_LEASED,
    RESULT_COLUMNS,
    RESULT_NAMES,
    ClaimedRow,
    OutcomeRow,
    vanished_retry_sql,
)

log = structlog.get_logger("tucano.deliveries")

# The queues are spelled exactly as their partial indexes' conditions, which a planner needs to
# use them; other workers' claims are skipped, not waited for.
# Hosts left out by the target URL of each delivery's webhook: its scheme://host[:port]
# (worker.dispatcher.target_key, lower case) followed by nothing, /, ? or #, so that a hanging host
# behind more webhooks than a worker may hold cannot fill every claim.
_NOT_TO_HOSTS = """
(cardinality($7::text[]) = 0 OR NOT EXISTS (
    SELECT 1 FROM webhooks AS w, unnest($7::text[]) AS k(host)
     WHERE w.id = deliveries.webhook_id
       AND lower(left(w.target_url, length(k.host))) = k.host
       AND substr(w.target_url, length(k.host) + 1, 1) IN ('', '/', '?', '#')))"""
_CLAIM = f"""
WITH retry AS (
    SELECT id FROM deliveries
     WHERE {RETRY_QUEUE} AND next_attempt_at <= $1 AND {NOT_LEASED.format(now="$1")}
       AND webhook_id <> ALL($5::bigint[]) AND {_NOT_TO_HOSTS}
     ORDER BY next_attempt_at LIMIT $2
       FOR UPDATE SKIP LOCKED
), fresh AS (
    SELECT id FROM deliveries
     WHERE {FIRST_ATTEMPT_QUEUE} AND next_attempt_at <= $1 AND {NOT_LEASED.format(now="$1")}
       AND webhook_id <> ALL($5::bigint[]) AND {_NOT_TO_HOSTS}
     ORDER BY next_attempt_at LIMIT $3 - (SELECT count(*) FROM retry)
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE deliveries AS d
       SET lease_until = $4, claim_token = $6, updated_at = $1
     WHERE d.id IN (SELECT id FROM retry UNION ALL SELECT id FROM fresh)
    RETURNING d.id, d.event_id, d.webhook_id, d.customer_id, d.attempts
)
SELECT {CLAIMED_COLUMNS.format(d="c")}
  FROM claimed AS c
  -- LATERAL ... LIMIT 1: one index lookup per claimed row, never a hash of the events table.
 CROSS JOIN LATERAL (
        SELECT event_type, payload, created_at FROM events WHERE id = c.event_id LIMIT 1
       ) AS e
  LEFT JOIN LATERAL (
        SELECT target_url, is_active, secret, previous_secrets, event_type
          FROM webhooks WHERE id = c.webhook_id LIMIT 1
       ) AS w ON true
"""  # noqa: S608 - our own constants

# (name, PostgreSQL type) of each field of an outcome row, in the JSON array it travels in.
_OUTCOME_TYPES = {
    "delivery_id": "bigint",
    "claim_token": "text",
    "customer_id": "bigint",
    "webhook_id": "bigint",
    "event_id": "text",
    "event_type": "text",
    "target_url": "text",
    "attempt": "int",
    "status": "text",
    "http_status": "int",
    "response_body": "text",
    "error_message": "text",
    "duration_ms": "int",
    "attempted_at": "timestamptz",
    "next_attempt_at": "timestamptz",
}
_OUTCOME_FIELDS = ", ".join(
    f"(r->>{i})::{_OUTCOME_TYPES[name]} AS {name}" for i, name in enumerate(OutcomeRow._fields)
)
# A retry whose delivery vanished (vanished_retry), read from `locked` (`l`), the rows as they
# are once locked: the statement's snapshot predates a deletion the lock waited for.
_NOT_RETRIED = vanished_retry_sql(
    "o", vanished=f"o.status = '{ResultStatus.PENDING_RETRY}' AND l.id IS NULL"
)
_RESULT_VALUES = ", ".join(_NOT_RETRIED.get(name, f"o.{name}") for name in RESULT_NAMES)
# Results are inserted; deliveries move on only where this worker still holds the claim (a retry
# gets its next time, a finished delivery leaves the queue). LATERAL with LIMIT and
# `= ANY(ARRAY(...))` keep every step to index lookups of the batch's own ids. `locked`: the
# batch's deliveries in id order, as a webhook's deletion locks them (no deadlock); `held`:
# those this worker still holds.
_RECORD = f"""
WITH outcome AS MATERIALIZED (
    SELECT {_OUTCOME_FIELDS} FROM jsonb_array_elements($1::jsonb) AS r
), locked AS (
    SELECT d.id, d.claim_token, o.claim_token AS ours, o.next_attempt_at
      FROM (SELECT delivery_id, claim_token, next_attempt_at FROM outcome ORDER BY delivery_id) AS o
     CROSS JOIN LATERAL (
        SELECT d.id, d.claim_token FROM deliveries AS d WHERE d.id = o.delivery_id FOR UPDATE
     ) AS d
), held AS (
    SELECT id, next_attempt_at FROM locked WHERE claim_token = ours
), recorded AS (
    INSERT INTO delivery_results ({RESULT_COLUMNS})
    SELECT {_RESULT_VALUES}
      FROM outcome AS o
      LEFT JOIN locked AS l ON l.id = o.delivery_id
    RETURNING customer_id, webhook_id, event_type, status, attempted_at
), counted AS ({result_counts.COUNT_RECORDED_ON_POSTGRES}
), finished AS (
    DELETE FROM deliveries
     WHERE id = ANY(ARRAY(SELECT id FROM held WHERE next_attempt_at IS NULL))
)
UPDATE deliveries AS d
   SET attempts = d.attempts + 1, next_attempt_at = h.next_attempt_at, claim_token = NULL,
       lease_until = NULL, updated_at = $2
  FROM held AS h
 WHERE d.id = h.id AND d.id = ANY(ARRAY(SELECT id FROM held WHERE next_attempt_at IS NOT NULL))
"""  # noqa: S608 - our own column names


class PostgresQueue:
    """QueueBackend on PostgreSQL."""

    async def claim(
        self,
        database: Database,
        *,
        retries: int,
        limit: int,
        now: datetime,
        until: datetime,
        token: str,
        exclude_webhooks: Sequence[int],
        exclude_hosts: Sequence[str],
    ) -> list[ClaimedRow]:
        async with database.driver_connection() as connection:
            rows = await connection.fetch(
                _CLAIM,
                now,
                retries,
                limit,
                until,
                list(exclude_webhooks),
                token,
                list(exclude_hosts),
            )
        return [ClaimedRow._make(row) for row in rows]

    async def record(
        self,
        database: Database,
        rows: Sequence[OutcomeRow],
        *,
        now: datetime,
        health: Sequence[DeliveryHealth],
    ) -> None:
        async with database.driver_connection() as connection:
            await connection.execute(_RECORD, orjson.dumps([tuple(r) for r in rows]).decode(), now)
        try:
            await record_delivery_health_on_postgres(database, health)
        except Exception as exc:
            # The attempts are recorded; raising now would have the caller record them twice.
            if is_database_unavailable(exc):  # an outage: one line, as the worker's others
                log.warning(
                    "delivery_health_update_failed",
                    webhooks=len(health),
                    error=exception_summary(exc),
                )
            else:
                log.exception("delivery_health_update_failed", webhooks=len(health))
