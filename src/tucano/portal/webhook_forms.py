"""The portal's webhook forms: what a person typed, checked by the rules the API applies (its
schemas and webhooks.service.check_target), each problem shown beside its field; and what a
webhook's own page shows of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tucano.auth.tokens import Principal
from tucano.config import Settings
from tucano.core.errors import AppError, ErrorCode
from tucano.core.languages import Language, moment
from tucano.db.database import Database
from tucano.deliveries import service as deliveries
from tucano.events.samples import VARIANTS
from tucano.events.types import EventType
from tucano.portal.pages import SUCCESS_PERIOD, last_attempt, success_rate
from tucano.portal.texts import TEXTS
from tucano.webhooks import service as webhooks
from tucano.webhooks.models import Webhook
from tucano.webhooks.schemas import WebhookCreate, WebhookUpdate
from tucano.webhooks.secret_store import WebhookSecretStore

EVENT_TYPES: tuple[str, ...] = tuple(event_type.value for event_type in EventType)
FIELDS = ("target_url", "event_type", "is_active")
CHECKED = "on"  # what a ticked checkbox sends


@dataclass(frozen=True)
class Problem:
    """What is wrong, in the page's language; `detail` is the webhooks service's own reason
    (English, as the API gives it), shown after it."""

    text: str
    detail: str | None = None


@dataclass
class WebhookForm:
    """The fields of the create and edit forms, as typed, and what is wrong with them (by
    field; "form" for the form as a whole)."""

    target_url: str = ""
    event_type: str = ""
    is_active: bool = True
    problems: dict[str, Problem] = field(default_factory=dict)

    @classmethod
    def of(cls, webhook: Webhook) -> WebhookForm:
        return cls(webhook.target_url, webhook.event_type, webhook.is_active)

    @classmethod
    def posted(cls, fields: dict[str, str]) -> WebhookForm:
        return cls(
            target_url=fields.get("target_url", "").strip(),
            event_type=fields.get("event_type", ""),
            is_active=fields.get("is_active") == CHECKED,
        )


async def _checked(
    form: WebhookForm, *, settings: Settings, language: Language, check_url: bool = True
) -> EventType | None:
    """The form's event type once every field passes the API's rules; None, with `problems`
    filled in, otherwise. The target is checked before any session opens, as the API does."""
    t = TEXTS[language]
    if not form.target_url:
        form.problems["target_url"] = Problem(t["wh_error_url_missing"])
    elif check_url:
        try:
            await webhooks.check_target(form.target_url, settings)
        except AppError as refused:
            if refused.code != ErrorCode.WEBHOOK_TARGET_REFUSED:
                raise
            reason = " ".join(refused.errors).removeprefix("targetUrl ")
            form.problems["target_url"] = Problem(t["wh_error_url_refused"], reason)
    if form.event_type not in EVENT_TYPES:
        form.problems["event_type"] = Problem(t["wh_error_event_type"])
    return None if form.problems else EventType(form.event_type)


async def create(
    database: Database,
    form: WebhookForm,
    *,
    customer_id: int,
    settings: Settings,
    store: WebhookSecretStore,
    language: Language,
) -> Webhook | None:
    """The customer's new webhook, or None with the form's problems filled in. It has no
    partner: a portal session acts for the customer, not for one of its API clients."""
    event_type = await _checked(form, settings=settings, language=language)
    if event_type is None:
        return None
    data = WebhookCreate(
        partner_id=None, target_url=form.target_url, event_type=event_type, is_active=form.is_active
    )
    caller = Principal("portal", customer_id, None, frozenset())
    try:
        async with database.session() as session:
            webhook = await webhooks.create_webhook(
                session, caller=caller, data=data, settings=settings, secret_store=store
            )
            await session.commit()
    except AppError as refused:
        if refused.code != ErrorCode.WEBHOOK_LIMIT_REACHED:
            raise
        limit = settings.max_webhooks_per_customer
        form.problems["form"] = Problem(TEXTS[language]["wh_error_limit"].format(limit=limit))
        return None
    return webhook


async def update(
    database: Database,
    form: WebhookForm,
    *,
    customer_id: int,
    webhook_id: int,
    settings: Settings,
    language: Language,
) -> Webhook | None:
    """The webhook as the form changed it, or None with the form's problems filled in. A target
    left as it was is not sent, so it is not checked again (as an API client leaving it out)."""
    async with database.read_session() as session:
        stored = await webhooks.get_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
    changed_url = form.target_url != stored.target_url
    event_type = await _checked(form, settings=settings, language=language, check_url=changed_url)
    if event_type is None:
        return None
    changes: dict[str, object] = {"event_type": event_type, "is_active": form.is_active}
    if changed_url:
        changes["target_url"] = form.target_url
    data = WebhookUpdate.model_validate(changes)
    async with database.session() as session:
        webhook = await webhooks.update_webhook(
            session, customer_id=customer_id, webhook_id=webhook_id, data=data
        )
        await session.commit()
    return webhook


@dataclass(frozen=True)
class WebhookDetail:
    """A webhook as its own page shows it: the list's line, why Tucano switched it off (if it
    did), and the variants its test event may take."""

    webhook_id: int
    target_url: str
    event_type: str
    is_active: bool
    success_rate: str
    last_attempt: str
    last_attempt_failed: bool
    deactivated_at: str | None
    deactivation_reason: str | None
    variants: tuple[str, ...]
    form: WebhookForm


async def detail(
    database: Database, *, customer_id: int, webhook_id: int, now: datetime, language: Language
) -> WebhookDetail:
    """The customer's webhook (404 for another's), its health over SUCCESS_PERIOD."""
    async with database.read_session() as session:
        row = await webhooks.get_webhook(session, customer_id=customer_id, webhook_id=webhook_id)
        activity = await deliveries.webhook_activity(
            session, customer_id=customer_id, webhook_ids=[row.id], period=SUCCESS_PERIOD, now=now
        )
    health = activity[row.id]
    # Shown while it stays off: switched back on, it starts afresh.
    switched_off = None if row.is_active else row.deactivated_at
    return WebhookDetail(
        webhook_id=row.id,
        target_url=row.target_url,
        event_type=row.event_type,
        is_active=row.is_active,
        success_rate=success_rate(health, language),
        last_attempt=last_attempt(health, language),
        last_attempt_failed=health.last_status not in (None, "SUCCESS"),
        deactivated_at=None if switched_off is None else moment(switched_off, language),
        deactivation_reason=None if switched_off is None else row.deactivation_reason,
        variants=tuple(VARIANTS.get(EventType(row.event_type), ())),
        form=WebhookForm.of(row),
    )
