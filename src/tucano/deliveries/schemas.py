from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tucano.api.wire import ApiModel, RangeEnd, RangeStart, UtcTimestamp, range_is_reversed
from tucano.deliveries.models import DeliveryResult
from tucano.deliveries.service import PublishedEvent
from tucano.events.samples import VARIANTS, Variant
from tucano.events.types import EventType

ResultStatusName = Literal["SUCCESS", "FAILED", "PENDING_RETRY", "EXHAUSTED"]


class WebhookResult(ApiModel):
    """One delivery attempt."""

    result_id: int
    webhook_id: int
    event_id: str = Field(description="Also the webhook-id header of the delivery.")
    event_type: EventType
    target_url: str
    attempt: int = Field(description="1-based, per delivery.")
    status: ResultStatusName = Field(
        description="SUCCESS (2xx); PENDING_RETRY (failed, retried at nextAttemptAt); EXHAUSTED "
        "(failed, last attempt of the schedule); FAILED (not sent, or not retried: the webhook "
        "was inactive, deleted, or now receives another event type; errorMessage says which)."
    )
    http_status: int | None = Field(description="Null when no response was received.")
    response_body: str | None = Field(description="The first 1 KiB of the response.")
    error_message: str | None
    duration_ms: int
    attempted_at: UtcTimestamp
    next_attempt_at: UtcTimestamp | None

    @classmethod
    def of(cls, row: DeliveryResult) -> WebhookResult:
        return cls(
            result_id=row.id,
            webhook_id=row.webhook_id,
            event_id=row.event_id,
            event_type=EventType(row.event_type),
            target_url=row.target_url,
            attempt=row.attempt,
            status=row.status,
            http_status=row.http_status,
            response_body=row.response_body,
            error_message=row.error_message,
            duration_ms=row.duration_ms,
            attempted_at=row.attempted_at,
            next_attempt_at=row.next_attempt_at,
        )


_WITH_VARIANTS = ", ".join(event_type.value for event_type in VARIANTS)


class SampleEventRequest(ApiModel):
    event_type: EventType
    variant: Variant | None = Field(
        default=None,
        description="Which case of the event type the sample shows (each is an example of its "
        "event in the `webhooks` section): "
        + "; ".join(
            f"{event_type.value}: {variants[0]} (the default), " + ", ".join(variants[1:])
            for event_type, variants in VARIANTS.items()
        )
        + ". Other types have none, and refuse one.",
    )

    @field_validator("variant", mode="before")
    @classmethod
    def _a_variant_of_the_event_type(cls, value: Any, info: ValidationInfo) -> Any:
        # Absent from info.data when the event type was invalid: that error is reported already.
        event_type = info.data.get("event_type")
        if event_type is None or value is None:
            return value
        allowed = VARIANTS.get(event_type, ())
        if not allowed:
            raise ValueError(
                f"is not taken by {event_type.value}: only {_WITH_VARIANTS} have variants"
            )
        if value not in allowed:
            raise ValueError(f"must be one of: {', '.join(allowed)} (for {event_type.value})")
        return value


class Redelivery(ApiModel):
    event_id: str = Field(min_length=1, max_length=40, examples=["evt_0f8e..."])


class EventAccepted(ApiModel):
    """The event is stored, with its deliveries queued."""

    event_id: str
    event_type: EventType
    customer_id: int
    created_at: UtcTimestamp
    deliveries: int = Field(description="How many webhooks the event is queued for.")

    @classmethod
    def of(cls, event: PublishedEvent) -> EventAccepted:
        return cls(
            event_id=event.id,
            event_type=event.event_type,
            customer_id=event.customer_id,
            created_at=event.created_at,
            deliveries=event.deliveries,
        )


def _text(value: Any) -> Any:
    # A number would otherwise be read as Unix seconds.
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 timestamp such as 2026-01-15T10:30:00.000Z")
    return value


def _text_or_none(value: Any) -> Any:
    return value if value is None else _text(value)


class RecoveryRange(ApiModel):
    """Which failures to recover: those whose last attempt started in [since, until]."""

    since: Annotated[
        RangeStart,
        BeforeValidator(_text),
        Field(
            description="Failed for good at or after: an ISO 8601 timestamp (UTC when it has "
            "no offset) or a date (from the start of that day, UTC).",
            examples=["2026-01-15T00:00:00.000Z"],
        ),
    ]
    until: Annotated[
        RangeEnd | None,
        BeforeValidator(_text_or_none),
        Field(
            description="Failed for good at or before (default: now): an ISO 8601 timestamp or "
            "a date (to the end of that day, UTC). At most 14 days after `since`.",
            examples=["2026-01-16T00:00:00.000Z"],
        ),
    ] = None
    # The bounds as sent, for range_is_reversed.
    _as_sent: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_the_bounds_as_sent(
        cls, data: Any, handler: ModelWrapValidatorHandler[RecoveryRange]
    ) -> RecoveryRange:
        model = handler(data)
        if isinstance(data, dict):
            model._as_sent = {k: v for k, v in data.items() if isinstance(v, str)}
        return model

    def is_reversed(self, until: datetime) -> bool:
        """Whether `since` comes after `until` (this range's, or now when it has none)."""
        return range_is_reversed(
            self.since,
            until,
            start_as_sent=self._as_sent.get("since"),
            end_as_sent=self._as_sent.get("until") if self.until is not None else None,
        )


class RecoveryCount(ApiModel):
    count: int = Field(
        description="How many events were queued for delivery again (with dryRun: would be)."
    )
