from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StrictInt, field_validator

from tucano.api.wire import ApiModel, UtcTimestamp, WholeNumber
from tucano.core.errors import ErrorCode, NotFound
from tucano.events.types import EventType
from tucano.webhooks.models import Webhook as WebhookRow
from tucano.webhooks.signing import previous_secrets
from tucano.webhooks.url_safety import MAX_URL_LENGTH

MAX_ID = 2**63 - 1


def _an_id_or_not_found(value: int) -> int:
    # 0, -1 or 2**64 in a path name no webhook, like any id that was never given: a 404, as a
    # client looking one up expects, rather than a 400 about the range of ids.
    if not 1 <= value <= MAX_ID:
        raise NotFound(ErrorCode.WEBHOOK_NOT_FOUND)
    return value


# A webhook's id in a path: any integer; one outside the ids given out names no webhook (404).
WebhookIdInPath = Annotated[WholeNumber, AfterValidator(_an_id_or_not_found)]
PartnerId = Annotated[StrictInt, Field(ge=1, le=MAX_ID)]
TargetUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="Absolute https URL (http only in sandbox), no credentials, public host.",
        # The scheme is read regardless of case, as URLs are.
        json_schema_extra={"format": "uri", "pattern": "^[hH][tT][tT][pP][sS]?://"},
        examples=["https://merchant.example.com/webhooks/tucano"],
    ),
]


class WebhookCreate(ApiModel):
    partner_id: PartnerId | None = Field(
        default=None,
        description="Omitted: the partner of the calling client, if any. null: no partner.",
    )
    target_url: TargetUrl
    event_type: EventType
    is_active: StrictBool = Field(default=True, description="Defaults to true.")


def _not_nullable_in_schema(schema: dict[str, Any]) -> None:
    """Document targetUrl, eventType and isActive of an update as optional but never null."""
    for name in ("targetUrl", "eventType", "isActive"):
        prop = schema["properties"][name]
        options = [o for o in prop.pop("anyOf", []) if o.get("type") != "null"]
        if len(options) == 1:
            prop.update(options[0])
        prop.pop("default", None)


class WebhookUpdate(ApiModel):
    """Fields sent replace the stored ones; fields left out keep their values."""

    model_config = ConfigDict(json_schema_extra=_not_nullable_in_schema)

    partner_id: PartnerId | None = None
    # Optional but not nullable: left out keeps the stored value, null is refused.
    target_url: TargetUrl | None = None
    event_type: EventType | None = None
    is_active: StrictBool | None = None

    @field_validator("target_url", "event_type", "is_active", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null")
        return value


class Webhook(ApiModel):
    webhook_id: int
    customer_id: int
    partner_id: int | None
    target_url: str
    event_type: EventType
    is_active: bool

    @classmethod
    def of(cls, row: WebhookRow) -> Webhook:
        return cls(
            webhook_id=row.id,
            customer_id=row.customer_id,
            partner_id=row.partner_id,
            target_url=row.target_url,
            event_type=EventType(row.event_type),
            is_active=row.is_active,
        )


class WebhookCreated(Webhook):
    secret: str = Field(
        description="Signing secret (whsec_...) for verifying deliveries (Standard Webhooks)."
    )

    @classmethod
    def with_secret(cls, row: WebhookRow, *, secret: str) -> WebhookCreated:
        """`row` with its signing secret, opened (webhooks.secret_store)."""
        return cls(**Webhook.of(row).model_dump(), secret=secret)


class WebhookDeliveryStatus(ApiModel):
    """How deliveries to this webhook are going, and whether Tucano switched it off."""

    webhook_id: int
    is_active: bool
    failing_since: UtcTimestamp | None = Field(
        description="Start of the current run of failed deliveries; null after any success."
    )
    last_success_at: UtcTimestamp | None
    deactivated_at: UtcTimestamp | None = Field(
        description="When Tucano deactivated the webhook because every delivery kept failing."
    )
    deactivation_reason: str | None

    @classmethod
    def of(cls, row: WebhookRow) -> WebhookDeliveryStatus:
        return cls(
            webhook_id=row.id,
            is_active=row.is_active,
            failing_since=row.failing_since,
            last_success_at=row.last_success_at,
            deactivated_at=row.deactivated_at,
            deactivation_reason=row.deactivation_reason,
        )


class WebhookSecret(ApiModel):
    secret: str = Field(description="The current signing secret.")
    previous_secret_expires_at: UtcTimestamp | None = Field(
        default=None,
        description="Until this moment deliveries are also signed with a secret that a "
        "rotation replaced (each keeps signing for 24 hours after it was replaced); null when "
        "none is in its grace.",
    )

    @classmethod
    def of(cls, *, secret: str, stored_previous: str | None, now: datetime) -> WebhookSecret:
        """From the secrets opened (webhooks.secret_store)."""
        graces = [until for _, until in previous_secrets(stored_previous, now=now)]
        return cls(secret=secret, previous_secret_expires_at=max(graces, default=None))
