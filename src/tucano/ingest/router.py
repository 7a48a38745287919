"""The events endpoints, that the provider's own systems publish through: one event, or a batch
of up to 500 in one transaction (decisions.md, "Publishing events in batches")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from pydantic import ValidationError
from starlette.responses import Response

from tucano.api.dependencies import JsonContent, error_responses
from tucano.api.deps import DatabaseDep
from tucano.api.errors import validation_lines
from tucano.api.routing import DecimalJSONRoute
from tucano.api.wire import json_response
from tucano.auth.deps import EventPublisher
from tucano.core import json_codec
from tucano.core.errors import BadRequest
from tucano.deliveries.schemas import EventAccepted
from tucano.deliveries.service import NewEvent
from tucano.events.payloads import PAYLOAD_MODELS
from tucano.ingest import service
from tucano.ingest.earlier_fingerprints import earlier_publication_fingerprint
from tucano.ingest.schemas import EventBatch, EventPublication, EventsAccepted

router = APIRouter(prefix="/internal/v1", tags=["internal"], route_class=DecimalJSONRoute)

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Any 1 to 255 visible ASCII characters, unique per publication (a UUID, "
        "say), kept for 24 hours per API client.",
        min_length=1,
        max_length=255,
        pattern=r"^[!-~]+$",
    ),
]

_PIX_PAYS_A_LINK = (
    "A `PIX_QR_INBOUND` of type PAYMENT whose `txid` is one of the customer's payment links and "
    "whose `amount` is the link's pays that link in the same transaction (its "
    "`PAYMENT_LINK_INBOUND` is published with it); one that differs, or a link already paid or "
    "expired, pays nothing."
)


@router.post(
    "/events",
    summary="Publish an event (provider systems)",
    description="Stores the event and queues its deliveries to the customer's active webhooks of "
    "its type; answers 202 once both are durable. The payload must match its type's schema "
    "(see the webhooks section); it is delivered as published, fields the schema does not name "
    "included, with money written with two decimals and times in UTC with milliseconds. In a "
    "field the schema does not name, a value that reads as a card number is refused. "
    "With an `Idempotency-Key`, a retry of the same request within "
    "24 hours answers the first 202 again (with `Idempotent-Replayed: true`) and publishes "
    "nothing; the same key with another request is a 409. " + _PIX_PAYS_A_LINK,
    status_code=202,
    response_model=EventAccepted,
    responses=error_responses(400, 401, 403, 409, 413, 415),
)
async def publish_event(
    caller: EventPublisher,
    _json: JsonContent,
    body: EventPublication,
    request: Request,
    database: DatabaseDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    events = _new_events([body], location=())
    return await _publish(
        request,
        database,
        caller.client_id,
        events,
        idempotency_key,
        answer=lambda published: EventAccepted.of(published[0]),
        fingerprints=lambda: (
            service.publication_fingerprint(events[0]),
            earlier_publication_fingerprint(events[0]),
        ),
    )


@router.post(
    "/events/batch",
    summary="Publish up to 500 events at once, all or nothing (provider systems)",
    description="Each item is the body of `POST /internal/v1/events`, and is checked as it would "
    "be there; one invalid item is a 400 naming it (`events[3].payload.amount ...`) and stores "
    "nothing. 202 once every event and its deliveries are durable, in one transaction: "
    "`events` holds the answer the single endpoint gives for each, in the order sent. An "
    "`Idempotency-Key` covers the whole batch: a retry of the same batch within 24 hours answers "
    "the first 202 again (with `Idempotent-Replayed: true`); the same key with another batch, "
    "or with a single event, is a 409. The body limit applies to the batch as a whole, and it "
    "counts as one request against the client's rate limit. " + _PIX_PAYS_A_LINK,
    status_code=202,
    response_model=EventsAccepted,
    responses=error_responses(400, 401, 403, 409, 413, 415),
)
async def publish_event_batch(
    caller: EventPublisher,
    _json: JsonContent,
    body: EventBatch,
    request: Request,
    database: DatabaseDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    events = _new_events(body.events, location=("events",))
    return await _publish(
        request,
        database,
        caller.client_id,
        events,
        idempotency_key,
        answer=lambda published: EventsAccepted(events=[EventAccepted.of(e) for e in published]),
        fingerprints=lambda: (service.batch_fingerprint(events),),
    )


def _new_events(items: Sequence[EventPublication], *, location: tuple[str, ...]) -> list[NewEvent]:
    """Each item's payload read by its type's model; every invalid one named in one 400."""
    events: list[NewEvent] = []
    errors: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = (*location, index) if location else ()
        try:
            payload = PAYLOAD_MODELS[item.event_type].model_validate(item.payload)
        except ValidationError as exc:
            errors += [{**e, "loc": ("body", *where, "payload", *e["loc"])} for e in exc.errors()]
            continue
        events.append(NewEvent(item.customer_id, item.event_type, payload))
    if errors:
        raise BadRequest(*validation_lines(errors))
    return events


async def _publish(
    request: Request,
    database: DatabaseDep,
    client_id: str,
    events: list[NewEvent],
    idempotency_key: str | None,
    *,
    answer: Any,
    fingerprints: Callable[[], tuple[str, ...]],
) -> Response:
    if len(request.headers.getlist("idempotency-key")) > 1:
        raise BadRequest("Idempotency-Key: give it once")
    if idempotency_key is None:
        return json_response(answer(await service.publish(database, events)), status_code=202)
    body, replayed = await service.publish_once(
        database,
        events,
        idempotency=service.IdempotentPublication(client_id, idempotency_key, *fingerprints()),
        answer=lambda published: json_codec.dumps(answer(published)),
    )
    return Response(
        body,
        status_code=202,
        media_type="application/json",
        headers={"Idempotent-Replayed": "true"} if replayed else None,
    )
