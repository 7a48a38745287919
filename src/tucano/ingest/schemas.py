"""The bodies of the events endpoints (POST /internal/v1/events and its batch)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictInt

from tucano.api.wire import ApiModel
from tucano.deliveries.schemas import EventAccepted
from tucano.events.types import EventType
from tucano.webhooks.schemas import MAX_ID


class EventPublication(ApiModel):
    event_type: EventType
    customer_id: StrictInt = Field(ge=1, le=MAX_ID)
    payload: dict[str, Any] = Field(
        description="The event's payload, as documented for its type in the webhooks section."
    )


# decisions.md, "Publishing events in batches".
MAX_EVENTS_PER_BATCH = 500


class EventBatch(ApiModel):
    events: list[EventPublication] = Field(
        min_length=1,
        max_length=MAX_EVENTS_PER_BATCH,
        description="1 to 500 events, each the body of POST /internal/v1/events.",
    )


class EventsAccepted(ApiModel):
    """Every event of the batch is stored, with its deliveries queued."""

    events: list[EventAccepted] = Field(description="One answer per event, in the order sent.")
