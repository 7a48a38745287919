"""Delivery results (A6), redelivery, sandbox test events, and the internal events endpoint."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from pydantic import ValidationError
from starlette.responses import Response

from tucano import flows
from tucano.api.dependencies import JsonContent, error_responses, optional_transaction_id
from tucano.api.errors import validation_lines
from tucano.api.pagination import Page, PageParams
from tucano.api.routing import DecimalJSONRoute
from tucano.api.sessions import ReadSessionDep, SessionDep
from tucano.api.wire import RangeEnd, RangeStart, WholeNumber, json_response, range_is_reversed
from tucano.auth.deps import EventPublisher, WebhookReader, WebhookWriter
from tucano.core import json_codec
from tucano.core.errors import AppError, BadRequest, ErrorCode
from tucano.deliveries import outbox, publication, results
from tucano.deliveries.compat_2026_11_24 import earlier_publication_fingerprint
from tucano.deliveries.schemas import (
    EventAccepted,
    EventPublication,
    Redelivery,
    ResultStatusName,
    SampleEventRequest,
    WebhookResult,
)
from tucano.events.payloads import PAYLOAD_MODELS
from tucano.events.samples import sample_payload
from tucano.events.types import EventType
from tucano.webhooks.schemas import MAX_ID, WebhookIdInPath

router = APIRouter(
    prefix="/webhook/v1",
    tags=["webhook deliveries"],
    route_class=DecimalJSONRoute,
    dependencies=[Depends(optional_transaction_id)],
)
internal_router = APIRouter(prefix="/internal/v1", tags=["internal"], route_class=DecimalJSONRoute)


@router.get(
    "/list/results",
    summary="List delivery results (A6)",
    description="One record per delivery attempt, newest first.",
    response_model=Page[WebhookResult],
    responses=error_responses(400, 401, 403),
)
async def list_results(
    request: Request,
    caller: WebhookReader,
    session: ReadSessionDep,
    page: PageParams,
    event_type: Annotated[EventType | None, Query(alias="eventType")] = None,
    webhook_id: Annotated[WholeNumber | None, Query(alias="webhookId", ge=1, le=MAX_ID)] = None,
    status: Annotated[ResultStatusName | None, Query()] = None,
    start_date: Annotated[
        RangeStart | None,
        Query(
            alias="startDate",
            description="Attempts at or after: an ISO 8601 timestamp (UTC when it has no "
            "offset) or a date (from the start of that day, UTC).",
        ),
    ] = None,
    end_date: Annotated[
        RangeEnd | None,
        Query(
            alias="endDate",
            description="Attempts at or before: an ISO 8601 timestamp (UTC when it has no "
            "offset) or a date (to the end of that day, UTC).",
        ),
    ] = None,
) -> Response:
    if (
        start_date is not None
        and end_date is not None
        and range_is_reversed(
            start_date,
            end_date,
            start_as_sent=request.query_params.get("startDate"),
            end_as_sent=request.query_params.get("endDate"),
        )
    ):
        raise BadRequest("startDate must not be after endDate")
    rows, total = await results.list_results(
        session,
        customer_id=caller.customer_id,
        filters=results.ResultFilters(event_type, webhook_id, status, start_date, end_date),
        page=page,
    )
    return json_response(
        Page[WebhookResult].of(
            [WebhookResult.of(r) for r in rows], total=total, page=page.page, size=page.size
        )
    )


@router.post(
    "/{id:webhook_id}/redeliver",
    summary="Deliver an event to a webhook again",
    description="Queues a new delivery (attempt numbering starts again at 1) of one of your "
    "events to one of your active webhooks of the same event type.",
    status_code=202,
    response_model=EventAccepted,
    responses=error_responses(400, 401, 403, 404, 409, 415),
)
async def redeliver(
    caller: WebhookWriter,
    _json: JsonContent,
    webhook_id: Annotated[WebhookIdInPath, Path(alias="id")],
    body: Redelivery,
    session: SessionDep,
) -> Response:
    event = await outbox.redeliver(
        session, customer_id=caller.customer_id, webhook_id=webhook_id, event_id=body.event_id
    )
    await session.commit()
    return json_response(
        EventAccepted(
            event_id=event.id,
            event_type=EventType(event.event_type),
            customer_id=event.customer_id,
            created_at=event.created_at,
            deliveries=1,
        ),
        status_code=202,
    )


@router.post(
    "/test-events",
    summary="Send a sample event to your own webhooks (sandbox only)",
    status_code=202,
    response_model=EventAccepted,
    responses=error_responses(400, 401, 403, 415),
)
async def send_test_event(
    caller: WebhookWriter,
    _json: JsonContent,
    body: SampleEventRequest,
    request: Request,
) -> Response:
    if not request.app.state.settings.is_sandbox:
        raise AppError(ErrorCode.SANDBOX_ONLY, errors=["test events exist only in the sandbox"])
    payload = sample_payload(body.event_type, partner_id=caller.partner_id)
    (event,) = await outbox.publish_events_alone(
        request.app.state.database,
        [outbox.NewEvent(caller.customer_id, body.event_type, payload)],
    )
    return json_response(_accepted(event), status_code=202)


@internal_router.post(
    "/events",
    summary="Publish an event (provider systems)",
    description="Stores the event and queues its deliveries to the customer's active webhooks of "
    "its type; answers 202 once both are durable. The payload must match its type's schema "
    "(see the webhooks section); it is delivered as published, fields the schema does not name "
    "included, with money written with two decimals and times in UTC with milliseconds. In a "
    "field the schema does not name, a value that reads as a card number is refused. "
    "With an `Idempotency-Key`, a retry of the same request within "
    "24 hours answers the first 202 again (with `Idempotent-Replayed: true`) and publishes "
    "nothing; the same key with another request is a 409. A `PIX_QR_INBOUND` of type PAYMENT "
    "whose `txid` is one of the customer's payment links and whose `amount` is the link's pays "
    "that link in the same transaction (its `PAYMENT_LINK_INBOUND` is published with it); one "
    "that differs, or a link already paid or expired, pays nothing.",
    status_code=202,
    response_model=EventAccepted,
    responses=error_responses(400, 401, 403, 409, 413, 415),
)
async def publish_event(
    caller: EventPublisher,
    _json: JsonContent,
    body: EventPublication,
    request: Request,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="Any 1 to 255 visible ASCII characters, unique per publication (a UUID, "
            "say), kept for 24 hours per API client.",
            min_length=1,
            max_length=255,
            pattern=r"^[!-~]+$",
        ),
    ] = None,
) -> Response:
    model = PAYLOAD_MODELS[body.event_type]
    try:
        payload = model.model_validate(body.payload)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", "payload", *e["loc"])} for e in exc.errors()]
        raise BadRequest(*validation_lines(errors)) from None
    if len(request.headers.getlist("idempotency-key")) > 1:
        raise BadRequest("Idempotency-Key: give it once")
    event = outbox.NewEvent(body.customer_id, body.event_type, payload)
    database = request.app.state.database
    if idempotency_key is None:
        if flows.pays_a_link(event):
            async with database.session() as session:
                (published,) = await flows.publish_events_paying_links(session, [event])
                await session.commit()
        else:
            (published,) = await outbox.publish_events_alone(database, [event])
        return json_response(_accepted(published), status_code=202)
    answer, replayed = await publication.publish_event_once(
        database,
        event,
        idempotency=publication.IdempotentPublication(
            caller.client_id,
            idempotency_key,
            publication.publication_fingerprint(event),
            earlier_publication_fingerprint(event),
        ),
        answer=lambda published: json_codec.dumps(_accepted(published)),
        publish=flows.publish_events_paying_links,
    )
    return Response(
        answer,
        status_code=202,
        media_type="application/json",
        headers={"Idempotent-Replayed": "true"} if replayed else None,
    )


def _accepted(event: outbox.PublishedEvent) -> EventAccepted:
    return EventAccepted(
        event_id=event.id,
        event_type=event.event_type,
        customer_id=event.customer_id,
        created_at=event.created_at,
        deliveries=event.deliveries,
    )
