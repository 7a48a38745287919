"""What each portal page shows, gathered from the features' own services (the portal reads no
table of theirs), scoped to the session's customer, and written in the page's language."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from tucano.brazil.brasilia_time import brasilia_date, brasilia_midnight
from tucano.core.languages import Language, moment
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.deliveries.activity import WebhookActivity
from tucano.payment_links import service as payment_links
from tucano.payment_links.filters import LinkFilters
from tucano.portal.texts import TEXTS
from tucano.webhooks import service as webhooks

# The period a webhook's success rate covers.
SUCCESS_PERIOD = timedelta(days=7)
WEBHOOKS_PER_PAGE = 50


@dataclass(frozen=True)
class Overview:
    webhooks: int
    links_today: int
    links_today_amount: Decimal


async def overview(database: Database, *, customer_id: int, now: datetime) -> Overview:
    """How many webhooks the customer has, and the links it created today (Brasília's day)."""
    _, webhook_count = await webhooks.list_webhooks(
        database, customer_id=customer_id, event_type=None, page=PageRequest(0, 1)
    )
    today = LinkFilters(start=brasilia_midnight(brasilia_date(now)), end=now)
    async with database.read_session() as session:
        report = await payment_links.report(session, customer_id=customer_id, filters=today)
    return Overview(webhook_count, report["total_count"], report["total_amount"])


@dataclass(frozen=True)
class WebhookLine:
    """One row of the webhooks table, its health in words."""

    webhook_id: int
    target_url: str
    event_type: str
    is_active: bool
    success_rate: str
    last_attempt: str
    last_attempt_failed: bool


@dataclass(frozen=True)
class WebhooksPage:
    lines: list[WebhookLine]
    total: int
    page: int
    pages: int


async def webhooks_page(
    database: Database, *, customer_id: int, page: int, now: datetime, language: Language
) -> WebhooksPage:
    """A page of the customer's webhooks, oldest first, each with its success rate over
    SUCCESS_PERIOD and its last attempt."""
    asked = PageRequest(max(page, 0), WEBHOOKS_PER_PAGE)
    rows, total = await webhooks.list_webhooks(
        database, customer_id=customer_id, event_type=None, page=asked
    )
    async with database.read_session() as session:
        activity = await deliveries.webhook_activity(
            session,
            customer_id=customer_id,
            webhook_ids=[row.id for row in rows],
            period=SUCCESS_PERIOD,
            now=now,
        )
    lines = [
        WebhookLine(
            webhook_id=row.id,
            target_url=row.target_url,
            event_type=row.event_type,
            is_active=row.is_active,
            success_rate=success_rate(activity[row.id], language),
            last_attempt=last_attempt(activity[row.id], language),
            last_attempt_failed=activity[row.id].last_status not in (None, "SUCCESS"),
        )
        for row in rows
    ]
    pages = -(-total // WEBHOOKS_PER_PAGE)
    return WebhooksPage(lines, total, asked.page, pages)


def success_rate(activity: WebhookActivity, language: Language) -> str:
    t = TEXTS[language]
    percent = activity.success_percent
    if percent is None:
        return t["no_attempts"]
    return t["success_rate"].format(
        percent=percent, succeeded=activity.succeeded, attempts=activity.attempts
    )


def last_attempt(activity: WebhookActivity, language: Language) -> str:
    t = TEXTS[language]
    if activity.last_attempt_at is None or activity.last_status is None:
        return t["no_attempts"]
    said = [moment(activity.last_attempt_at, language), t[f"attempt_{activity.last_status}"]]
    if activity.last_http_status is not None:
        said.append(t["attempt_http"].format(status=activity.last_http_status))
    return " · ".join(said)
