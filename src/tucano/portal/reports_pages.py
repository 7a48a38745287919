"""The portal's reports: totals of the customer's links by status and by payment method, a chart
of the amounts per day (drawn on the server, with the table of days as its text), and the CSV of
the links, all from the payment-link feature's report and export, with the list's filters. A
read-only session sees and downloads all of it: nothing here changes anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from tucano.core.clock import clock
from tucano.core.errors import BadRequest
from tucano.core.languages import Language, money
from tucano.payment_links import export
from tucano.payment_links import service as payment_links
from tucano.payment_links.deps import PaymentLinksDep
from tucano.portal.deps import PageSessionDep
from tucano.portal.layout import show
from tucano.portal.link_filters import read_filters
from tucano.portal.rendering import PREFIX
from tucano.portal.report_chart import day_chart, day_label
from tucano.portal.routing import PortalPageRoute
from tucano.portal.texts import TEXTS

router = APIRouter(prefix=f"{PREFIX}/reports", route_class=PortalPageRoute, include_in_schema=False)
PAGE = f"{PREFIX}/reports"
CSV = f"{PREFIX}/reports/csv"


@dataclass(frozen=True)
class TotalLine:
    """A row of a totals table: what it counts, how many, their amount and what was refunded."""

    label: str
    count: int
    amount: str
    refunded: str


@dataclass(frozen=True)
class DayLine:
    day: str
    count: int
    amount: str


def _line(label: str, total: dict[str, Any], language: Language) -> TotalLine:
    return TotalLine(
        label,
        total["count"],
        money(total["amount"], language),
        money(total["refunded_amount"], language),
    )


def report_context(
    report: dict[str, Any], first: date, last: date, language: Language
) -> dict[str, Any]:
    """What the page shows of the feature's report, in the page's language."""
    t = TEXTS[language]
    chart = day_chart(report["by_day"], first, last, language)
    return {
        "total": TotalLine(
            t["rp_total_count"],
            report["total_count"],
            money(report["total_amount"], language),
            money(report["refunded_amount"], language),
        ),
        "by_status": [
            _line(t[f"status_{total['status']}"], total, language) for total in report["by_status"]
        ],
        "by_method": [
            _line(t[f"method_{int(total['payment_method'])}"], total, language)
            for total in report["by_payment_method"]
        ],
        "chart": chart,
        "chart_desc": t["rp_chart_desc"].format(
            start=day_label(first, language, full=True),
            end=day_label(last, language, full=True),
            top=chart.top if chart is not None else money(Decimal(0), language),
        ),
        "days": [
            DayLine(
                day_label(date.fromisoformat(day["date"]), language, full=True),
                day["count"],
                money(day["amount"], language),
            )
            for day in report["by_day"]
        ],
        "period": t["rp_period"].format(
            start=day_label(first, language, full=True), end=day_label(last, language, full=True)
        ),
    }


@router.get("")
async def reports_page(request: Request, page: PageSessionDep, links: PaymentLinksDep) -> Response:
    form = read_filters(request.query_params, now=clock.now(), language=page.language)
    context: dict[str, Any] = {}
    if form.filters is not None:
        async with links.database.read_session() as session:
            report = await payment_links.report(
                session, customer_id=page.customer_id, filters=form.filters
            )
        context = report_context(report, form.first_day, form.last_day, page.language)
    return show(
        request,
        page,
        "reports.html",
        current="reports",
        status=200 if form.filters is not None else 400,
        form=form,
        filter_action=PAGE,
        csv_action=CSV,
        csv_default="excel-br" if page.language == "pt-BR" else "rfc4180",
        **context,
    )


@router.get("/csv")
async def download_csv(
    request: Request,
    page: PageSessionDep,
    links: PaymentLinksDep,
    csv_format: Annotated[export.CsvForm, Query(alias="csvFormat")] = export.CsvForm.RFC4180,
) -> Response:
    """The links the filters match, as the API's CSV in the form asked for, streamed."""
    form = read_filters(request.query_params, now=clock.now(), language=page.language)
    if form.filters is None:
        raise BadRequest(*(f"{name}: {text}" for name, text in form.errors.items()))
    rows = export.stream_csv(
        links.database, customer_id=page.customer_id, filters=form.filters, form=csv_format
    )
    name = f"payment-links-{form.first_day.isoformat()}-{form.last_day.isoformat()}.csv"
    return StreamingResponse(
        rows,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
