"""The delivery queue on PostgreSQL, tuned: a claim and a record are one statement each, run on
asyncpg's connection in autocommit, the batch travelling as one JSON parameter of named fields
(docs/performance.md, "Where PostgreSQL is tuned", measures what it saves over the plain path).
Giving claims back is the plain back end's (sql.py): it is not on the path of every delivery."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import timedelta

import orjson

from tucano.core.clock import clock
from tucano.db.postgres import driver_connection
from tucano.deliveries.health import DeliveryHealth, next_health
from tucano.deliveries.models import FIRST_ATTEMPT_QUEUE, RETRY_QUEUE
from tucano.deliveries.queue.backend import (
    Claim,
    Outcome,
    claimed_delivery,
    not_retried,
    retries_share,
)
from tucano.deliveries.queue.sql import SqlQueue
from tucano.deliveries.result_counts import hour_of
from tucano.webhooks.secret_store import WebhookSecretStore

# Left out by host: a webhook whose URL is one of $7's scheme://host[:port] followed by nothing,
# /, ? or #. The queues are spelled as their partial indexes' conditions, which the planner
# needs to use them; rows other workers hold are skipped, not waited for.
NOT_TO_HOSTS = """
(cardinality($7::text[]) = 0 OR NOT EXISTS (
    SELECT 1 FROM webhooks AS w, unnest($7::text[]) AS k(host)
     WHERE w.id = deliveries.webhook_id
       AND lower(left(w.target_url, length(k.host))) = k.host
       AND substr(w.target_url, length(k.host) + 1, 1) IN ('', '/', '?', '#')))"""
DUE = """
    SELECT id FROM deliveries
     WHERE {queue} AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
       AND webhook_id <> ALL($5::bigint[]) AND {not_to_hosts}
     ORDER BY next_attempt_at LIMIT {limit}
       FOR UPDATE SKIP LOCKED"""
# The rows of a CTE `claimed` with their event and webhook, named as backend.claimed_delivery
# reads them; LATERAL ... LIMIT 1: one index lookup per claimed row, never a hash of the events
# table.
CLAIMED_ROWS = """
SELECT c.id AS delivery_id, c.event_id, c.webhook_id, c.customer_id, c.attempts, e.event_type,
       e.payload, e.created_at AS event_created_at, w.target_url, w.is_active, w.secret,
       w.previous_secrets, w.event_type AS subscribed_to
  FROM claimed AS c
 CROSS JOIN LATERAL (
        SELECT event_type, payload, created_at FROM events WHERE id = c.event_id LIMIT 1
       ) AS e
  LEFT JOIN LATERAL (
        SELECT target_url, is_active, secret, previous_secrets, event_type
          FROM webhooks WHERE id = c.webhook_id LIMIT 1
       ) AS w ON true
"""
# Retries up to their share ($2), then first attempts, due and held by nobody.
DUE_SHARES = f"""
WITH retry AS ({DUE.format(queue=RETRY_QUEUE, not_to_hosts=NOT_TO_HOSTS, limit="$2")}
), fresh AS ({
    DUE.format(
        queue=FIRST_ATTEMPT_QUEUE,
        not_to_hosts=NOT_TO_HOSTS,
        limit="$3 - (SELECT count(*) FROM retry)",
    )
}
)"""  # noqa: S608 - our own constants
_CLAIM = f"""{DUE_SHARES}, claimed AS (
    UPDATE deliveries AS d
       SET lease_until = $4, claim_token = $6, updated_at = $1
     WHERE d.id IN (SELECT id FROM retry UNION ALL SELECT id FROM fresh)
    RETURNING d.id, d.event_id, d.webhook_id, d.customer_id, d.attempts
)
{CLAIMED_ROWS}"""  # noqa: S608 - our own constants

# Each outcome of the batch as recorded if its delivery is still queued, and as recorded if it
# has left the queue (backend.not_retried): the rule is Python's, the statement only picks, by
# what it finds once the row is locked.
_OUTCOME = """o(
    delivery_id bigint, claim_token text, customer_id bigint, webhook_id bigint, event_id text,
    event_type text, target_url text, attempt int, http_status int, response_body text,
    duration_ms int, attempted_at timestamptz, hour bigint,
    status text, error_message text, next_attempt_at timestamptz,
    gone_status text, gone_error_message text, gone_next_attempt_at timestamptz)"""
# Results are inserted with their hour counts; deliveries move on only where this worker still
# holds the claim (a retry gets its next time, a finished delivery leaves the queue). `locked`:
# the batch's deliveries in id order, as a webhook's deletion locks them (no deadlock). The
# update names its rows by `= ANY(ARRAY(...))` too: a lookup by key per row, where a join on the
# CTE's guessed size could scan the whole queue.
_RECORD = f"""
WITH outcome AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS {_OUTCOME}
), locked AS (
    SELECT d.id, d.claim_token
      FROM (SELECT DISTINCT delivery_id FROM outcome ORDER BY delivery_id) AS o
     CROSS JOIN LATERAL (
        SELECT d.id, d.claim_token FROM deliveries AS d WHERE d.id = o.delivery_id FOR UPDATE
     ) AS d
), result AS (
    SELECT o.*, l.id IS NULL AS gone, l.claim_token IS NOT DISTINCT FROM o.claim_token AS held
      FROM outcome AS o LEFT JOIN locked AS l ON l.id = o.delivery_id
), recorded AS (
    INSERT INTO delivery_results
        (delivery_id, customer_id, webhook_id, event_id, event_type, target_url, attempt, status,
         http_status, response_body, error_message, duration_ms, attempted_at, next_attempt_at)
    SELECT delivery_id, customer_id, webhook_id, event_id, event_type, target_url, attempt,
           CASE WHEN gone THEN gone_status ELSE status END, http_status, response_body,
           CASE WHEN gone THEN gone_error_message ELSE error_message END, duration_ms,
           attempted_at, CASE WHEN gone THEN gone_next_attempt_at ELSE next_attempt_at END
      FROM result
    RETURNING 1
), counted AS (
    INSERT INTO delivery_result_counts
        (customer_id, hour, webhook_id, event_type, status, result_count, folded)
    SELECT customer_id, hour, webhook_id, event_type,
           CASE WHEN gone THEN gone_status ELSE status END, count(*), false
      FROM result
     GROUP BY 1, 2, 3, 4, 5
), finished AS (
    DELETE FROM deliveries
     WHERE id = ANY(ARRAY(SELECT delivery_id FROM result
                           WHERE held AND NOT gone AND next_attempt_at IS NULL))
)
UPDATE deliveries AS d
   SET attempts = d.attempts + 1, next_attempt_at = r.next_attempt_at, claim_token = NULL,
       lease_until = NULL, updated_at = $2
  FROM result AS r
 WHERE d.id = r.delivery_id AND r.held AND NOT r.gone AND r.next_attempt_at IS NOT NULL
   AND d.id = ANY(ARRAY(SELECT delivery_id FROM result
                         WHERE held AND NOT gone AND next_attempt_at IS NOT NULL))
"""  # noqa: S608 - our own constants


def _recorded(outcome: Outcome) -> dict[str, object]:
    """An outcome as a row of _RECORD's batch."""
    c, gone = outcome.claimed, not_retried(outcome)
    return {
        "delivery_id": c.delivery_id,
        "claim_token": c.claim_token,
        "customer_id": c.customer_id,
        "webhook_id": c.webhook_id,
        "event_id": c.event_id,
        "event_type": c.event_type,
        "target_url": outcome.target_url,
        "attempt": c.attempt,
        "http_status": outcome.http_status,
        "response_body": outcome.response_body,
        "duration_ms": outcome.duration_ms,
        "attempted_at": outcome.attempted_at,
        "hour": hour_of(outcome.attempted_at),
        "status": outcome.status,
        "error_message": outcome.error_message,
        "next_attempt_at": outcome.next_attempt_at,
        "gone_status": gone.status,
        "gone_error_message": gone.error_message,
        "gone_next_attempt_at": gone.next_attempt_at,
    }


# The webhooks' health (health.next_health decides it): their rows locked in id order, as other
# workers' records lock them, and the new values set in one statement.
_HEALTH = """
SELECT id, last_success_at, failing_since FROM webhooks WHERE id = ANY($1::bigint[])
"""
# Compare and set, without a transaction around the read: a webhook another worker changed in
# between is left out (and read again), and the rows are locked in id order, as a deletion
# locks them, so two workers never deadlock.
_SET_HEALTH = """
WITH locked AS (
    SELECT id FROM webhooks WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE
)
UPDATE webhooks AS w SET last_success_at = h.last_success_at, failing_since = h.failing_since
  FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[],
              $5::timestamptz[]) AS h(id, last_success_at, failing_since, was_success, was_failing)
  JOIN locked ON locked.id = h.id
 WHERE w.id = h.id AND w.last_success_at IS NOT DISTINCT FROM h.was_success
   AND w.failing_since IS NOT DISTINCT FROM h.was_failing
RETURNING w.id
"""
HEALTH_TRIES = 3


class PostgresQueue(SqlQueue):
    """QueueBackend on PostgreSQL: SqlQueue, with its claim and record in one statement each,
    and the webhooks' health in two."""

    async def claim(
        self,
        *,
        secret_store: WebhookSecretStore,
        limit: int,
        lease: timedelta,
        exclude_webhooks: Sequence[int] = (),
        exclude_hosts: Sequence[str] = (),
    ) -> Claim:
        now = clock.now()
        token = secrets.token_hex(16)
        until = now + lease
        retries = retries_share(limit)
        async with driver_connection(self.database) as connection:
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
        claimed = [
            claimed_delivery(
                row, token=token, lease_until=until, secret_store=secret_store, now=now
            )
            for row in rows
        ]
        retried = sum(1 for row in rows if row["attempts"] > 0)
        return Claim(
            [c for c in claimed if c is not None],
            more_due=retried >= retries or len(rows) >= limit,
        )

    async def record(self, outcomes: Sequence[Outcome]) -> None:
        if not outcomes:
            return
        batch = orjson.dumps([_recorded(o) for o in outcomes]).decode()
        async with driver_connection(self.database) as connection:
            await connection.execute(_RECORD, batch, clock.now())
        await self.record_health_of(outcomes)

    async def record_health(self, health: Sequence[DeliveryHealth]) -> None:
        batch = {h.webhook_id: h for h in health}
        for _ in range(HEALTH_TRIES):
            if not batch:
                return
            async with driver_connection(self.database) as connection:
                changed = []
                for row in await connection.fetch(_HEALTH, sorted(batch)):
                    stored = (row["last_success_at"], row["failing_since"])
                    health_now = next_health(*stored, batch[row["id"]])
                    if health_now != stored:
                        changed.append((row["id"], *health_now, *stored))
                if not changed:
                    return
                columns = [list(values) for values in zip(*sorted(changed), strict=True)]
                applied = {row["id"] for row in await connection.fetch(_SET_HEALTH, *columns)}
            batch = {c[0]: batch[c[0]] for c in changed if c[0] not in applied}
