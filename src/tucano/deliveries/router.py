"""Delivery results (A6), redelivery, sandbox test events, and deleting a webhook (which takes
its pending deliveries off the queue). The events endpoints that other systems publish through
are the ingest feature's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from tucano.api.dependencies import JsonContent, error_responses, optional_transaction_id
from tucano.api.deps import DatabaseDep, ReadSessionDep, SessionDep, SettingsDep
from tucano.api.pagination import Page, PageParams
from tucano.api.routing import DecimalJSONRoute
from tucano.api.wire import RangeEnd, RangeStart, WholeNumber, range_is_reversed
from tucano.auth.deps import WebhookReader, WebhookWriter
from tucano.core.clock import clock
from tucano.core.errors import BadRequest
from tucano.deliveries import service
from tucano.deliveries.result_repository import ResultFilters
from tucano.deliveries.schemas import (
    EventAccepted,
    RecoveryCount,
    RecoveryRange,
    Redelivery,
    ResultStatusName,
    SampleEventRequest,
    WebhookResult,
)
from tucano.events.types import EventType
from tucano.webhooks.schemas import MAX_ID, WebhookIdInPath

router = APIRouter(
    prefix="/webhook/v1",
    tags=["webhook deliveries"],
    route_class=DecimalJSONRoute,
    dependencies=[Depends(optional_transaction_id)],
)


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
) -> Page[WebhookResult]:
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
    rows, total = await service.list_results(
        session,
        customer_id=caller.customer_id,
        filters=ResultFilters(event_type, webhook_id, status, start_date, end_date),
        page=page,
    )
    return Page[WebhookResult].of(
        [WebhookResult.of(r) for r in rows], total=total, page=page.page, size=page.size
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
) -> EventAccepted:
    event = await service.redeliver(
        session, customer_id=caller.customer_id, webhook_id=webhook_id, event_id=body.event_id
    )
    await session.commit()
    return EventAccepted(
        event_id=event.id,
        event_type=EventType(event.event_type),
        customer_id=event.customer_id,
        created_at=event.created_at,
        deliveries=1,
    )


@router.post(
    "/{id:webhook_id}/recover",
    summary="Deliver again every event that failed for good in a time range",
    description="Queues a new delivery to one of your active webhooks of each of its events "
    "whose last attempt there ended FAILED or EXHAUSTED between `since` and `until` (at most "
    "14 days apart) and that has no delivery to it pending: an event delivered since, or still "
    "to be retried, is left out, and so is one a recovery already queued. Answers how many. "
    "With `dryRun=true`, makes the same checks, queues nothing and answers 200 with how many it "
    "would queue.",
    status_code=202,
    response_model=RecoveryCount,
    responses={
        200: {"description": "The dry run's count.", "model": RecoveryCount},
        **error_responses(400, 401, 403, 404, 409, 415),
    },
)
async def recover(
    caller: WebhookWriter,
    _json: JsonContent,
    webhook_id: Annotated[WebhookIdInPath, Path(alias="id")],
    body: RecoveryRange,
    session: SessionDep,
    response: Response,
    dry_run: Annotated[
        bool,
        Query(alias="dryRun", description="Count what would be queued, and queue nothing."),
    ] = False,
) -> RecoveryCount:
    until = clock.now() if body.until is None else body.until
    if body.is_reversed(until):
        raise BadRequest("since must not be after until" + (" (now)" if body.until is None else ""))
    count = await service.recover(
        session,
        customer_id=caller.customer_id,
        webhook_id=webhook_id,
        since=body.since,
        until=until,
        dry_run=dry_run,
    )
    if dry_run:
        response.status_code = 200
    else:
        await session.commit()
    return RecoveryCount(count=count)


@router.post(
    "/test-events",
    summary="Send a sample event to your own webhooks (sandbox only)",
    description="A realistic payload of `eventType`, signed and delivered to your active "
    "webhooks of that type as any event is. `variant` picks the case it shows: a payment link "
    "paid, expired, cancelled, refunded in full or in part, or whose refund failed; a Pix QR "
    "code's payment or refund.",
    status_code=202,
    response_model=EventAccepted,
    responses=error_responses(400, 401, 403, 415),
)
async def send_test_event(
    caller: WebhookWriter,
    _json: JsonContent,
    body: SampleEventRequest,
    settings: SettingsDep,
    database: DatabaseDep,
) -> EventAccepted:
    event = await service.send_test_event(
        database,
        customer_id=caller.customer_id,
        partner_id=caller.partner_id,
        event_type=body.event_type,
        variant=body.variant,
        sandbox=settings.is_sandbox,
    )
    return EventAccepted.of(event)


# A5 sits with the webhook interface in the document, and here in the code: deleting a webhook
# also cancels its pending deliveries (service.delete_webhook).
webhook_deletion = APIRouter(
    prefix="/webhook/v1",
    tags=["webhooks"],
    route_class=DecimalJSONRoute,
    dependencies=[Depends(optional_transaction_id)],
)


@webhook_deletion.delete(
    "/{id:webhook_id}",
    summary="Delete a webhook (A5)",
    description="Its pending deliveries are cancelled: each waiting one is recorded as not "
    "sent; one being sent is recorded by its worker.",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 401, 403, 404, 415),
)
async def delete_webhook(
    caller: WebhookWriter,
    _json: JsonContent,
    webhook_id: Annotated[WebhookIdInPath, Path(alias="id", description="The webhookId.")],
    session: SessionDep,
) -> Response:
    await service.delete_webhook(session, customer_id=caller.customer_id, webhook_id=webhook_id)
    await session.commit()
    return Response(status_code=204)
