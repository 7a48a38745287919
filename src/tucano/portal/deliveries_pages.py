"""The portal's deliveries: every attempt, filtered as the API's results list is, with the
week's health drawn as a chart; an event with its payload and its attempts' answers, delivered
again to a webhook (Redeliver); and what failed for good in a range, counted first and then
delivered again (Recover)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from tucano.brazil.brasilia_time import BRASILIA
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.deliveries import service as deliveries
from tucano.deliveries.models import ResultStatus
from tucano.events.types import EventType
from tucano.portal import delivery_views as views
from tucano.portal.delivery_forms import (
    RecoveryRange,
    ResultsQuery,
    recovery_range,
    results_filters,
    webhook_id_of,
)
from tucano.portal.deps import PageSession, PageSessionDep, PortalDep, SignedForm, form_reader
from tucano.portal.layout import show
from tucano.portal.rendering import PREFIX
from tucano.portal.routing import PortalPageRoute

router = APIRouter(
    prefix=f"{PREFIX}/deliveries", route_class=PortalPageRoute, include_in_schema=False
)
LIST = f"{PREFIX}/deliveries"
# The service's refusals a page explains in its own words (the others are pages of their own).
PROBLEMS = {
    ErrorCode.WEBHOOK_INACTIVE: "problem_webhook_inactive",
    ErrorCode.WEBHOOK_EVENT_MISMATCH: "problem_webhook_mismatch",
}
Text = Annotated[str, Query(max_length=40)]
EventId = Annotated[str, Path(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]


def minute_field(moment: datetime) -> str:
    """`moment` as a datetime-local field's value in Brasília time, to the minute."""
    return moment.astimezone(BRASILIA).strftime("%Y-%m-%dT%H:%M")


def exact_field(moment: datetime) -> str:
    """`moment` in Brasília time to the microsecond, for a form to send back unchanged."""
    return moment.astimezone(BRASILIA).replace(tzinfo=None).isoformat()


def recovery_fields(webhook: str, *, now: datetime) -> dict[str, str]:
    """A recovery form's first values: from a day ago, up to whenever it is sent."""
    return {"webhook": webhook, "since": minute_field(now - timedelta(days=1)), "until": ""}


@router.get("")
async def deliveries_list(
    request: Request,
    page: PageSessionDep,
    portal: PortalDep,
    webhook: Text = "",
    event_type: Annotated[str, Query(alias="type", max_length=40)] = "",
    status: Text = "",
    start: Annotated[str, Query(alias="from", max_length=40)] = "",
    end: Annotated[str, Query(alias="to", max_length=40)] = "",
    number: Annotated[int, Query(alias="page", ge=0, le=10_000)] = 0,
    done: Annotated[str | None, Query(max_length=20)] = None,
    count: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    asked = ResultsQuery(webhook, event_type, status, start, end)
    filters, problems = results_filters(asked)
    now = clock.now()
    language = page.language
    choices = await views.webhook_choices(portal.database, customer_id=page.customer_id)
    charted = None if problems else filters.webhook_id
    chart = await views.health(
        portal.database,
        customer_id=page.customer_id,
        webhook_id=charted,
        now=now,
        language=language,
    )
    listed = None
    if not problems:
        listed = await views.results_page(
            portal.database,
            customer_id=page.customer_id,
            filters=filters,
            page=number,
            language=language,
        )
    parameters = asked.parameters()
    return show(
        request,
        page,
        "deliveries.html",
        current="deliveries",
        status=400 if problems else 200,
        asked=asked,
        problems=problems,
        listed=listed,
        chart=chart,
        # Named by its URL; by its id when it is not among the customer's (then it has none).
        charted=next(
            (c.target_url for c in choices if c.webhook_id == charted),
            None if charted is None else f"#{charted}",
        ),
        choices=choices,
        event_types=list(EventType),
        statuses=ResultStatus.ALL,
        page_link=lambda n: f"{LIST}?{urlencode({**parameters, 'page': n})}",
        recovery=recovery_fields(str(filters.webhook_id or ""), now=now),
        done="recovered" if done == "recovered" and count is not None else None,
        count=count,
    )


async def event_answer(
    request: Request,
    page: PageSession,
    portal: PortalDep,
    event_id: str,
    *,
    done: str | None = None,
    problem: str | None = None,
    status: int | None = None,
) -> Response:
    """An event's page: its payload, its attempts, and (unless read-only) a form to deliver it
    again to one of the customer's webhooks of its type, the last one it went to first."""
    event = await views.event_view(
        portal.database, customer_id=page.customer_id, event_id=event_id, language=page.language
    )
    event_type = EventType.__members__.get(event.event_type)
    choices = []
    if not page.read_only and event_type is not None:
        choices = await views.webhook_choices(
            portal.database, customer_id=page.customer_id, event_type=event_type
        )
    last = event.attempts[-1].webhook_id if event.attempts else None
    return show(
        request,
        page,
        "delivery_event.html",
        current="deliveries",
        status=status or (400 if problem else 200),
        event=event,
        choices=choices,
        chosen=last,
        done=done,
        problem=problem,
    )


@router.get("/events/{event_id}")
async def event_page(
    request: Request,
    page: PageSessionDep,
    portal: PortalDep,
    event_id: EventId,
    done: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    return await event_answer(
        request, page, portal, event_id, done="redelivered" if done == "redelivered" else None
    )


@router.post("/events/{event_id}/redeliver")
async def redeliver(
    request: Request,
    event_id: EventId,
    portal: PortalDep,
    form: Annotated[SignedForm, form_reader("webhook")],
) -> Response:
    page = form.page
    webhook_id = webhook_id_of(form.fields.get("webhook", ""))
    if webhook_id is None:
        return await event_answer(request, page, portal, event_id, problem="problem_webhook")
    try:
        async with portal.database.session() as session:
            await deliveries.redeliver(
                session, customer_id=page.customer_id, webhook_id=webhook_id, event_id=event_id
            )
            await session.commit()
    except AppError as refused:
        if refused.code not in PROBLEMS:
            raise
        return await event_answer(
            request, page, portal, event_id, problem=PROBLEMS[refused.code], status=409
        )
    return RedirectResponse(f"{LIST}/events/{event_id}?done=redelivered", 303)


async def _recovery_answer(
    request: Request,
    page: PageSession,
    portal: PortalDep,
    *,
    fields: dict[str, str],
    problem: str | None = None,
    status: int = 200,
    **context: Any,
) -> Response:
    choices = await views.webhook_choices(portal.database, customer_id=page.customer_id)
    return show(
        request,
        page,
        "delivery_recover.html",
        current="deliveries",
        status=status,
        choices=choices,
        recovery=fields,
        problem=problem,
        **context,
    )


def _asked(fields: dict[str, str]) -> tuple[int, RecoveryRange] | str:
    """The webhook and the range a recovery form asks for, or the key of its problem."""
    webhook_id = webhook_id_of(fields.get("webhook", ""))
    if webhook_id is None:
        return "problem_webhook"
    asked = recovery_range(fields.get("since", ""), fields.get("until", ""), now=clock.now())
    return asked if isinstance(asked, str) else (webhook_id, asked)


@router.get("/recover")
async def recover_page(
    request: Request,
    page: PageSessionDep,
    portal: PortalDep,
    webhook: Text = "",
    since: Text = "",
    until: Text = "",
) -> Response:
    """The recovery form; once it names a range, how many events it would deliver again, and
    a button to do it."""
    if page.read_only:
        raise AppError(
            ErrorCode.PORTAL_READ_ONLY, errors=["this session was opened with readOnly: true"]
        )
    fields = {"webhook": webhook, "since": since, "until": until}
    if not since and not until:
        return await _recovery_answer(
            request, page, portal, fields=recovery_fields(webhook, now=clock.now())
        )
    asked = _asked(fields)
    if isinstance(asked, str):
        return await _recovery_answer(
            request, page, portal, fields=fields, problem=asked, status=400
        )
    webhook_id, moments = asked
    preview = await views.recovery_preview(
        portal.database, customer_id=page.customer_id, webhook_id=webhook_id, asked=moments
    )
    return await _recovery_answer(
        request,
        page,
        portal,
        fields=fields,
        preview=preview,
        moments=moments,
        exact={"since": exact_field(moments.since), "until": exact_field(moments.until)},
        since_text=views.to_the_second(moments.since, page.language),
        until_text=views.to_the_second(moments.until, page.language),
    )


@router.post("/recover")
async def recover(
    request: Request,
    portal: PortalDep,
    form: Annotated[SignedForm, form_reader("webhook", "since", "until")],
) -> Response:
    page = form.page
    asked = _asked(form.fields)
    if isinstance(asked, str):
        return await _recovery_answer(
            request, page, portal, fields=form.fields, problem=asked, status=400
        )
    webhook_id, moments = asked
    try:
        async with portal.database.session() as session:
            queued = await deliveries.recover(
                session,
                customer_id=page.customer_id,
                webhook_id=webhook_id,
                since=moments.since,
                until=moments.until,
            )
            await session.commit()
    except AppError as refused:
        if refused.code not in PROBLEMS:
            raise
        return await _recovery_answer(
            request, page, portal, fields=form.fields, problem=PROBLEMS[refused.code], status=409
        )
    query = urlencode({"webhook": webhook_id, "done": "recovered", "count": queued})
    return RedirectResponse(f"{LIST}?{query}", 303)
