"""Refunds of a payment link, under /payment-link/v1: ask for one, list them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path
from starlette.responses import Response

from tucano.api.dependencies import JsonContent, RequiredTransactionId, error_responses
from tucano.api.deps import provided
from tucano.api.routing import DecimalJSONRoute
from tucano.api.wire import CanonicalUUID
from tucano.auth.deps import PaymentLinkReader, PaymentLinkWriter
from tucano.core import json_codec
from tucano.core.money import to_cents
from tucano.payment_links import service as payment_links
from tucano.payment_links.deps import PaymentLinksDep
from tucano.payment_links.lifecycle import RefundRequest
from tucano.payment_links.schemas import RefundCreate, RefundOut, refund_document
from tucano.refunds import service
from tucano.refunds.refunder import Refunder

router = APIRouter(prefix="/payment-link/v1", tags=["payment links"], route_class=DecimalJSONRoute)

RefunderDep = Annotated[Refunder, Depends(provided("refunder"))]
LinkUuid = Annotated[CanonicalUUID, Path(alias="linkPaymentUuid")]


@router.post(
    "/{linkPaymentUuid:link_uuid}/refunds",
    status_code=201,
    summary="Refund a paid payment link, in full or in part",
    description="Gives back `amount` (default: all that is left) of a PAID link's payment: a "
    "card payment through the card processor, a Pix payment through the Pix provider (up to 90 "
    "days after it was received; the `events` provider cannot refund). Several refunds per "
    "link, never more than was paid in all. Answers 201 with the refund, PENDING until it "
    "ends (card refunds usually end at once, Pix ones by the PSP's word); each ending sends a "
    "PAYMENT_LINK_INBOUND (REFUNDED, PARTIALLY_REFUNDED, or the refund FAILED). "
    "`x-transaction-id` is the idempotency key: the same id and body answer the first answer "
    "again and refund nothing more; the same id with another body is 409.",
    response_model=RefundOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 415),
)
async def refund_payment_link(
    caller: PaymentLinkWriter,
    _json: JsonContent,
    transaction_id: RequiredTransactionId,
    link_uuid: LinkUuid,
    links: PaymentLinksDep,
    refunder: RefunderDep,
    body: Annotated[RefundCreate | None, Body()] = None,
) -> Response:
    wanted = body or RefundCreate()
    answer = await service.request_refund(
        links.database,
        refunder,
        RefundRequest(
            customer_id=caller.customer_id,
            link_uuid=link_uuid,
            key=transaction_id,
            amount_cents=None if wanted.amount is None else to_cents(wanted.amount),
            reason=wanted.reason,
        ),
    )
    return Response(answer, status_code=201, media_type="application/json")


@router.get(
    "/{linkPaymentUuid:link_uuid}/refunds",
    summary="List a payment link's refunds",
    description="Every refund of the link, oldest first (an empty list for a link never refunded).",
    response_model=list[RefundOut],
    responses=error_responses(400, 401, 403, 404),
)
async def list_payment_link_refunds(
    caller: PaymentLinkReader,
    _transaction_id: RequiredTransactionId,
    link_uuid: LinkUuid,
    links: PaymentLinksDep,
) -> Response:
    _, _, refunds = await payment_links.read_link(
        links.database, customer_id=caller.customer_id, link_uuid=link_uuid
    )
    return Response(
        json_codec.dumps([refund_document(refund) for refund in refunds]),
        media_type="application/json",
    )
