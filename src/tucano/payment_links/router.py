"""The payment-link interface B1-B4, under /payment-link/v1."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BeforeValidator
from starlette.convertors import StringConvertor, register_url_convertor
from starlette.responses import Response, StreamingResponse

from tucano.api.dependencies import (
    JsonContent,
    RequiredTransactionId,
    error_responses,
    preferred_media_type,
)
from tucano.api.pagination import Page, PageParams
from tucano.api.routing import DecimalJSONRoute
from tucano.api.wire import CanonicalUUID, RangeEnd, RangeStart, json_response, range_is_reversed
from tucano.auth.deps import PaymentLinkReader, PaymentLinkWriter
from tucano.brazil.documents import normalize_document
from tucano.core import json_codec
from tucano.core.errors import BadRequest
from tucano.payment_links import export, lifecycle, service
from tucano.payment_links.deps import PaymentLinksDep
from tucano.payment_links.domain import PaymentMethod, StatusName
from tucano.payment_links.filters import LinkFilters
from tucano.payment_links.schemas import (
    PaymentLinkCreate,
    PaymentLinkOut,
    PaymentLinkReport,
)


class _LinkUuidConvertor(StringConvertor):
    """`{linkPaymentUuid:link_uuid}`: any segment but the fixed words of this interface."""

    regex = r"(?!(?:link-payment|report)(?:/|$))[^/]+"


register_url_convertor("link_uuid", _LinkUuidConvertor())


def _method_in_digits(value: object) -> object:
    # 2.0, +2 and " 2" are not how a method is written, though lax integers would read them so.
    if isinstance(value, str) and not value.isdigit():
        raise ValueError("must be one of: 1, 2")  # as for 0 or 3: one message for every bad value
    return value


router = APIRouter(prefix="/payment-link/v1", tags=["payment links"], route_class=DecimalJSONRoute)


async def link_filters(
    request: Request,
    start_date: Annotated[
        RangeStart,
        Query(
            alias="startDate",
            description="creationDate from (inclusive): an ISO 8601 timestamp (UTC when it "
            "has no offset) or a date (from the start of that day, UTC).",
        ),
    ],
    end_date: Annotated[
        RangeEnd,
        Query(
            alias="endDate",
            description="creationDate to (inclusive): an ISO 8601 timestamp (UTC when it has "
            "no offset) or a date (to the end of that day, UTC).",
        ),
    ],
    payment_receipt: Annotated[
        str | None,
        Query(alias="paymentReceipt", max_length=40, description="PIX end-to-end id or card NSU."),
    ] = None,
    status: Annotated[
        StatusName | None,
        Query(
            description="One status by name, as a reader sees it: CREATED (code 1), PAID (2, "
            "refunded in part included), EXPIRED (3), CANCELLED (4), REFUNDED (5: in full)."
        ),
    ] = None,
    payment_method: Annotated[
        Annotated[PaymentMethod, BeforeValidator(_method_in_digits)] | None,
        Query(alias="paymentMethod", description="1 credit card, 2 PIX."),
    ] = None,
    registration_number: Annotated[
        str | None,
        Query(
            alias="registrationNumber",
            # Room for punctuation and spaces, which are dropped before comparing.
            max_length=40,
            description="CPF or CNPJ, with or without punctuation.",
        ),
    ] = None,
    user_reference: Annotated[str | None, Query(alias="userReference", max_length=77)] = None,
) -> LinkFilters:
    if range_is_reversed(
        start_date,
        end_date,
        start_as_sent=request.query_params.get("startDate"),
        end_as_sent=request.query_params.get("endDate"),
    ):
        raise BadRequest("startDate must not be after endDate")
    if registration_number is not None:
        try:
            normalize_document(registration_number)
        except ValueError as exc:
            raise BadRequest(f"registrationNumber {exc}") from None
    return LinkFilters(
        start=start_date,
        end=end_date,
        payment_receipt=payment_receipt,
        status=status,
        payment_method=payment_method,
        registration_number=registration_number,
        user_reference=user_reference,
    )


Filters = Annotated[LinkFilters, Depends(link_filters)]


@router.post(
    "",
    summary="Create a payment link (B1)",
    description="`x-transaction-id` is also an idempotency key for 24 hours: the same id with the "
    "same body answers the same link and response again; with another body, 409.",
    response_model=PaymentLinkOut,
    responses=error_responses(400, 401, 403, 409, 413, 415),
)
async def create_payment_link(
    caller: PaymentLinkWriter,
    _json: JsonContent,  # before the header's 400: 401, 403, 415, then 400 (decisions.md)
    transaction_id: RequiredTransactionId,
    body: PaymentLinkCreate,
    links: PaymentLinksDep,
) -> Response:
    link = service.new_link(
        customer_id=caller.customer_id, data=body, autopay_delay=links.autopay_delay
    )
    answer = await service.create_link(
        links.database,
        ref=service.IdempotencyRef(
            caller.customer_id, transaction_id, service.request_fingerprint(body)
        ),
        link=link,
        response=json_codec.dumps(links.presenter()(link, None)),
    )
    return Response(answer, media_type="application/json")


@router.get(
    "/link-payment",
    summary="List payment links (B2)",
    description="Links created in [startDate, endDate], filtered; `sort` is `field,asc|desc` "
    "(repeatable; fields creationDate, amount, payerName, status (by its code); default "
    "creationDate,desc).",
    response_model=Page[PaymentLinkOut],
    responses=error_responses(400, 401, 403),
)
async def list_payment_links(
    caller: PaymentLinkReader,
    _transaction_id: RequiredTransactionId,
    filters: Filters,
    page: PageParams,
    links: PaymentLinksDep,
    sort: Annotated[list[str] | None, Query(description="field,asc|desc; repeatable.")] = None,
) -> Response:
    async with links.database.read_session() as session:  # (as in get_payment_link)
        rows, total = await service.list_links(
            session,
            customer_id=caller.customer_id,
            filters=filters,
            sort=sort or [],
            page=page,
        )
        refunds = await service.refunds_shown(session, [link for link, _ in rows])
    present = links.presenter()
    content = [present(link, payment, refunds.get(link.id, ())) for link, payment in rows]
    return json_response(Page[Any].of(content, total=total, page=page.page, size=page.size))


@router.get(
    "/report",
    summary="Report on payment links (B4)",
    description="Totals over every matched link (same filters as the list). With "
    "`Accept: text/csv`, the matched links themselves as CSV (a header row, one row per link), "
    "in the form `csvFormat` names.",
    response_model=PaymentLinkReport,
    responses={
        **error_responses(400, 401, 403),
        200: {"content": {"text/csv": {}}, "description": "The report (JSON), or links (CSV)."},
    },
)
async def report_payment_links(
    caller: PaymentLinkReader,
    _transaction_id: RequiredTransactionId,
    filters: Filters,
    request: Request,
    links: PaymentLinksDep,
    csv_format: Annotated[
        export.CsvForm,
        Query(
            alias="csvFormat",
            description="The CSV's form, when `Accept` asks for `text/csv` (ignored for JSON): "
            "`rfc4180` (the default: `,` between cells, a decimal point) or `excel-br`, for "
            "Excel in Brazilian Portuguese (`;` between cells, a decimal comma, a UTF-8 byte "
            "order mark).",
        ),
    ] = export.CsvForm.RFC4180,
) -> Response:
    wanted = preferred_media_type(
        request.headers.get("accept", ""), ["application/json", "text/csv"]
    )
    if wanted == "text/csv":
        rows = export.stream_csv(
            links.database,
            customer_id=caller.customer_id,
            filters=filters,
            form=csv_format,
        )
        return StreamingResponse(
            rows,
            media_type="text/csv; charset=utf-8",
            headers={
                "Content-Disposition": 'attachment; filename="payment-links.csv"',
                "Vary": "Accept",
            },
        )
    async with links.database.read_session() as session:
        totals = await service.report(session, customer_id=caller.customer_id, filters=filters)
    return json_response(PaymentLinkReport(**totals), headers={"Vary": "Accept"})


@router.get(
    "/{linkPaymentUuid:link_uuid}",
    summary="Read a payment link (B3)",
    response_model=PaymentLinkOut,
    responses=error_responses(400, 401, 403, 404),
)
async def get_payment_link(
    caller: PaymentLinkReader,
    _transaction_id: RequiredTransactionId,
    link_uuid: Annotated[CanonicalUUID, Path(alias="linkPaymentUuid")],
    links: PaymentLinksDep,
) -> Response:
    link, payment, refunds = await service.read_link(
        links.database, customer_id=caller.customer_id, link_uuid=link_uuid
    )
    return Response(
        json_codec.dumps(links.presenter()(link, payment, refunds)),
        media_type="application/json",
    )


@router.post(
    "/{linkPaymentUuid:link_uuid}/cancel",
    summary="Cancel a payment link",
    description="A CREATED link becomes CANCELLED: its checkout offers nothing more, its Pix "
    "charge (api-pix) is withdrawn, and a PAYMENT_LINK_INBOUND with status CANCELLED is sent. "
    "Any other status (paid, expired, cancelled, refunded) is a 409 that names it. Cancelling "
    "again answers 409, so a retried request tells you the link is cancelled.",
    response_model=PaymentLinkOut,
    responses=error_responses(400, 401, 403, 404, 409),
)
async def cancel_payment_link(
    caller: PaymentLinkWriter,
    _transaction_id: RequiredTransactionId,
    link_uuid: Annotated[CanonicalUUID, Path(alias="linkPaymentUuid")],
    links: PaymentLinksDep,
) -> Response:
    async with links.database.session() as session:
        link, payment = await lifecycle.cancel_link(
            session, customer_id=caller.customer_id, link_uuid=link_uuid
        )
        document = links.presenter()(link, payment)
        await session.commit()
    return Response(json_codec.dumps(document), media_type="application/json")
