"""The statements Tucano runs for the operations `bench/api.py` measures, written out by hand for
the driver ceiling (bench/api_driver.py): the same tables, filters, joins and counts as
the repositories of payment_links/ and webhooks/ emit, with `:name`
parameters (sqlite3's style; `numbered` turns them into asyncpg's `$n`)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from tucano.brazil.brasilia_time import brasilia_date, brasilia_midnight

PAYMENT_VIEW = """p.method, p.payment_id, p.payment_receipt, p.paid_at, p.installments,
    p.amount_cents AS payment_amount_cents"""

READ_LINK = f"""
SELECT l.*, {PAYMENT_VIEW}
  FROM payment_links l LEFT OUTER JOIN payment_link_payments p ON p.link_id = l.id
 WHERE l.uuid = :link_uuid AND l.customer_id = :customer
"""  # noqa: S608 - our own names

LIST_WEBHOOKS = """
SELECT id, customer_id, partner_id, target_url, event_type, is_active, secret, previous_secrets,
       created_at, updated_at, failing_since, last_success_at, deactivated_at,
       deactivation_reason, count(*) OVER () AS total
  FROM webhooks WHERE customer_id = :customer ORDER BY id LIMIT 20 OFFSET 0
"""


def list_page(dialect: str) -> str:
    """A page of 20 of the customer's links in [start, end], newest first, with how many match
    in the same statement: whole days from the day totals and their unfolded changes, the
    CREATED links of groups that expire today and the part-days at the ends link by link. Days
    are Brasília's (on SQLite through the brasilia_day function the driver registers)."""
    if dialect == "postgresql":
        day = "date(timezone('America/Sao_Paulo', l.created_at))"

        def expiry(t: str, day: str = "") -> str:
            return f"{day or t + '.day'} + {t}.expiration_days"
    else:
        day = "brasilia_day(l.created_at)"

        def expiry(t: str, day: str = "") -> str:
            return f"date({day or t + '.day'}, printf('+%d days', {t}.expiration_days))"

    status = """CASE WHEN l.status = 'PAID' THEN 'PAID' WHEN l.expires_at <= :now THEN 'EXPIRED'
        ELSE 'CREATED' END"""
    totals = [
        f"""SELECT t.day AS day, CASE WHEN t.status = 'PAID' THEN 'PAID'
               WHEN {expiry("t")} < :today THEN 'EXPIRED' ELSE 'CREATED' END AS status,
               t.payment_method AS method, t.link_count AS links, t.amount_cents AS cents
          FROM {table} t
         WHERE t.customer_id = :customer AND t.day >= :first AND t.day < :last
           AND NOT (t.status = 'CREATED' AND {expiry("t")} = :today)"""  # noqa: S608
        for table in ("payment_link_day_totals", "payment_link_day_changes")
    ]
    expiring_today = f"""SELECT {day} AS day, {status} AS status, 0 AS method,
               count(*) AS links, sum(l.amount_cents) AS cents
          FROM payment_links l
         WHERE l.customer_id = :customer AND l.created_at >= :created_from
           AND l.created_at < :created_to AND l.status = 'CREATED'
           AND l.expires_at >= :today_from AND l.expires_at < :today_to
           AND {expiry("l", day)} >= :today AND {expiry("l", day)} <= :today
         GROUP BY {day}, {status}"""  # noqa: S608
    ends = [
        f"""SELECT {day} AS day, {status} AS status, coalesce(p.method, 0) AS method,
               count(*) AS links, sum(l.amount_cents) AS cents
          FROM payment_links l LEFT OUTER JOIN payment_link_payments p ON p.link_id = l.id
         WHERE l.customer_id = :customer AND l.created_at >= :{low} AND l.created_at {op} :{high}
         GROUP BY {day}, {status}, coalesce(p.method, 0)"""  # noqa: S608
        for low, op, high in (("start", "<", "first_from"), ("last_from", "<=", "end"))
    ]
    parts = "\n UNION ALL ".join([*totals, expiring_today, *ends])
    return f"""
SELECT l.*, {PAYMENT_VIEW},
       (SELECT CAST(coalesce(sum(counted.links), 0) AS BIGINT)
          FROM ({parts}) AS counted) AS matched_total
  FROM payment_links l
  JOIN (SELECT id FROM payment_links
         WHERE customer_id = :customer AND created_at >= :start AND created_at <= :end
         ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0) AS page ON page.id = l.id
  LEFT OUTER JOIN payment_link_payments p ON p.link_id = l.id
 ORDER BY l.created_at DESC, l.id DESC
"""  # noqa: S608


def list_values(start_day: date, end_day: date, now: datetime) -> dict[str, date | datetime]:
    """The list's parameters for startDate and endDate given as dates (the whole days, to the
    millisecond, as Tucano reads them: UTC days, and within them the whole Brasília days; see
    filters.full_days). `now` on a day that lasts 24 hours, as every day since 2019."""
    midnight = brasilia_midnight
    today = brasilia_date(now)
    start = datetime.combine(start_day, time(0), tzinfo=UTC)
    end = datetime.combine(end_day + timedelta(1), time(0), tzinfo=UTC) - timedelta(milliseconds=1)
    first = brasilia_date(start) + timedelta(0 if start == midnight(brasilia_date(start)) else 1)
    last = brasilia_date(end + timedelta(milliseconds=1))
    return {
        "now": now,
        "today": today,
        "first": first,
        "last": last,
        "start": start,
        "end": end,
        "first_from": midnight(first),
        "last_from": midnight(last),
        "created_from": midnight(max(first, today - timedelta(10))),
        "created_to": midnight(min(last, today)),
        "today_from": midnight(today),
        "today_to": midnight(today + timedelta(1)),
    }


# The idempotency key, the link and its day change; the link only if the key went in.
CREATE_ON_POSTGRES = """
WITH key AS (
    INSERT INTO payment_link_idempotency_keys AS k
        (customer_id, key, request_hash, response, created_at)
    VALUES (:customer_id, :key, :fingerprint, :response, :created_at)
    ON CONFLICT (customer_id, key) DO UPDATE
       SET request_hash = excluded.request_hash, response = excluded.response,
           created_at = excluded.created_at
     WHERE k.created_at <= :window_start
    RETURNING 1
), link AS (
    INSERT INTO payment_links (uuid, customer_id, payer_name, registration_number, amount_cents,
        numbers_installments, description, user_reference, expiration_days, verification_token,
        status, created_at, expires_at, autopay_at, pix_txid)
    SELECT :uuid, :customer_id, :payer_name, :registration_number, :amount_cents,
        :numbers_installments, :description, :user_reference, :expiration_days,
        :verification_token, :status, :created_at, :expires_at, :autopay_at, :pix_txid
     WHERE EXISTS (SELECT 1 FROM key)
    RETURNING 1
), counted AS (
    INSERT INTO payment_link_day_changes (customer_id, day, expiration_days, status,
        payment_method, link_count, amount_cents)
    SELECT :customer_id, :day, :expiration_days, 'CREATED', 0, 1, :amount_cents
     WHERE EXISTS (SELECT 1 FROM link)
)
SELECT count(*) FROM link
"""

# SQLite: the same in one write transaction, a statement each (as Tucano's session runs them).
FIND_KEY = """SELECT request_hash, response FROM payment_link_idempotency_keys
 WHERE customer_id = :customer_id AND key = :key AND created_at > :window_start"""
REMEMBER_KEY = """INSERT INTO payment_link_idempotency_keys AS k
    (customer_id, key, request_hash, response, created_at)
VALUES (:customer_id, :key, :fingerprint, :response, :created_at)
ON CONFLICT (customer_id, key) DO UPDATE
   SET request_hash = excluded.request_hash, response = excluded.response,
       created_at = excluded.created_at
 WHERE k.created_at <= :window_start
RETURNING 1"""
INSERT_LINK = """INSERT INTO payment_links (uuid, customer_id, payer_name, registration_number,
    amount_cents, numbers_installments, description, user_reference, expiration_days,
    verification_token, status, created_at, expires_at, autopay_at, pix_txid)
VALUES (:uuid, :customer_id, :payer_name, :registration_number, :amount_cents,
    :numbers_installments, :description, :user_reference, :expiration_days,
    :verification_token, :status, :created_at, :expires_at, :autopay_at, :pix_txid)"""
INSERT_CHANGE = """INSERT INTO payment_link_day_changes (customer_id, day, expiration_days,
    status, payment_method, link_count, amount_cents)
VALUES (:customer_id, :day, :expiration_days, 'CREATED', 0, 1, :amount_cents)"""

_NAME = re.compile(r"(?<![:\w]):([a-z_]+)")


def numbered(sql: str) -> tuple[str, list[str]]:
    """`sql` with asyncpg's `$n` in place of each `:name`, and the names in `$n` order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _NAME.sub(number, sql), names
