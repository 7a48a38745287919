"""What the deliveries pages show, gathered from the delivery and webhook features' services
(the portal reads no table of theirs), scoped to the session's customer, in the page's language:
the attempts list, the week's health, an event with its attempts, and what a recovery would
deliver again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tucano.brazil.brasilia_time import BRASILIA, brasilia_date
from tucano.core import json_codec
from tucano.core.languages import Language
from tucano.core.paging import PageRequest
from tucano.db.database import Database
from tucano.deliveries import history
from tucano.deliveries import service as deliveries
from tucano.deliveries.models import DeliveryResult, ResultStatus
from tucano.deliveries.result_repository import ResultFilters
from tucano.events.types import EventType
from tucano.portal.charts import HealthChart, days_of, first_hour, health_chart
from tucano.portal.delivery_forms import RecoveryRange
from tucano.portal.texts import TEXTS
from tucano.webhooks import service as webhooks

RESULTS_PER_PAGE = 50
# The most webhooks a choice lists (a customer has a handful; the filter takes any id).
CHOICES = 200
EVENT_ATTEMPTS = 100


@dataclass(frozen=True)
class WebhookChoice:
    webhook_id: int
    target_url: str
    event_type: str
    is_active: bool


async def webhook_choices(
    database: Database, *, customer_id: int, event_type: EventType | None = None
) -> list[WebhookChoice]:
    """The customer's webhooks (of `event_type`, if given), oldest first, to choose from."""
    rows, _ = await webhooks.list_webhooks(
        database, customer_id=customer_id, event_type=event_type, page=PageRequest(0, CHOICES)
    )
    return [WebhookChoice(r.id, r.target_url, r.event_type, r.is_active) for r in rows]


@dataclass(frozen=True)
class Attempt:
    """One attempt, as the list and the event's page show it."""

    result_id: int
    webhook_id: int
    event_id: str
    event_type: str
    target_url: str
    attempt: int
    status: str
    status_text: str
    http_status: str
    duration: str
    when: str
    response_body: str | None
    error_message: str | None
    next_attempt: str | None

    @property
    def failed(self) -> bool:
        return self.status != ResultStatus.SUCCESS


def to_the_second(value: datetime, language: Language) -> str:
    """A moment in Brasília time with its seconds: attempts a few seconds apart read apart."""
    local = value.astimezone(BRASILIA)
    return local.strftime("%d/%m/%Y %H:%M:%S" if language == "pt-BR" else "%Y-%m-%d %H:%M:%S")


def attempt_of(row: DeliveryResult, language: Language) -> Attempt:
    t = TEXTS[language]
    return Attempt(
        result_id=row.id,
        webhook_id=row.webhook_id,
        event_id=row.event_id,
        event_type=row.event_type,
        target_url=row.target_url,
        attempt=row.attempt,
        status=row.status,
        status_text=t[f"attempt_{row.status}"],
        http_status=t["no_response"] if row.http_status is None else str(row.http_status),
        duration=t["duration_ms"].format(ms=row.duration_ms),
        when=to_the_second(row.attempted_at, language),
        response_body=row.response_body,
        error_message=row.error_message,
        next_attempt=(
            None if row.next_attempt_at is None else to_the_second(row.next_attempt_at, language)
        ),
    )


@dataclass(frozen=True)
class ResultsPage:
    attempts: list[Attempt]
    total: int
    page: int
    pages: int


async def results_page(
    database: Database,
    *,
    customer_id: int,
    filters: ResultFilters,
    page: int,
    language: Language,
) -> ResultsPage:
    """A page of the customer's attempts that match `filters`, newest first."""
    asked = PageRequest(max(page, 0), RESULTS_PER_PAGE)
    async with database.read_session() as session:
        rows, total = await deliveries.list_results(
            session, customer_id=customer_id, filters=filters, page=asked
        )
    pages = -(-total // RESULTS_PER_PAGE)
    return ResultsPage([attempt_of(row, language) for row in rows], total, asked.page, pages)


async def health(
    database: Database,
    *,
    customer_id: int,
    webhook_id: int | None,
    now: datetime,
    language: Language,
) -> HealthChart:
    """Attempts per Brasília day over the last week, to one webhook or to all the customer's."""
    today = brasilia_date(now)
    async with database.read_session() as session:
        hours = await history.attempts_per_hour(
            session, customer_id=customer_id, webhook_id=webhook_id, since_hour=first_hour(today)
        )
    return health_chart(days_of(hours, today=today, language=language))


@dataclass(frozen=True)
class EventView:
    event_id: str
    event_type: str
    created: str
    payload: str  # pretty JSON
    attempts: list[Attempt]
    limited: bool  # more attempts than shown


def pretty_json(text: str) -> str:
    """A JSON document indented for people, its numbers written as they were; text that is not
    JSON, as it is."""
    try:
        return json_codec.dumps(json_codec.loads(text), indent=True).decode()
    except ValueError:
        return text


async def event_view(
    database: Database, *, customer_id: int, event_id: str, language: Language
) -> EventView:
    """One of the customer's events (404 for another's), with its attempts, oldest first."""
    async with database.read_session() as session:
        event = await history.get_event(session, customer_id=customer_id, event_id=event_id)
        rows = await history.event_attempts(session, event=event, limit=EVENT_ATTEMPTS + 1)
    return EventView(
        event_id=event.id,
        event_type=event.event_type,
        created=to_the_second(event.created_at, language),
        payload=pretty_json(event.payload),
        attempts=[attempt_of(row, language) for row in rows[:EVENT_ATTEMPTS]],
        limited=len(rows) > EVENT_ATTEMPTS,
    )


@dataclass(frozen=True)
class RecoveryPreview:
    webhook: WebhookChoice
    count: int


async def recovery_preview(
    database: Database, *, customer_id: int, webhook_id: int, asked: RecoveryRange
) -> RecoveryPreview:
    """The customer's webhook (404 for another's) and how many events a recovery of the range
    would deliver to it again."""
    async with database.read_session() as session:
        webhook = await webhooks.get_webhook(
            session, customer_id=customer_id, webhook_id=webhook_id
        )
        count = await deliveries.count_recoverable(
            session,
            customer_id=customer_id,
            webhook_id=webhook_id,
            since=asked.since,
            until=asked.until,
        )
    choice = WebhookChoice(webhook.id, webhook.target_url, webhook.event_type, webhook.is_active)
    return RecoveryPreview(choice, count)
