"""The PSP's webhook: Pix received for the links' charges (`api-pix`), as the Banco Central's API
Pix posts them (`{"pix": [...]}` to the registered URL with `/pix` appended)."""

from __future__ import annotations

import hmac
from decimal import Decimal, InvalidOperation

import structlog
from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from tucano.api.deps import DatabaseDep, SettingsDep
from tucano.api.routing import DecimalJSONRoute
from tucano.core.errors import AppError, ErrorCode
from tucano.pix.charges import ReceivedPix, settle
from tucano.pix.refunds import settle_reported_refund

log = structlog.get_logger("tucano.pix")

router = APIRouter(prefix="/pix-provider/v1", tags=["pix provider"], route_class=DecimalJSONRoute)


class ReportedRefund(BaseModel):
    """One devolution of a received Pix (`devolucoes`), as the PSP reports it."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=35)
    rtr_id: str | None = Field(default=None, alias="rtrId", max_length=40)
    status: str = Field(max_length=40)
    motivo: str | None = Field(default=None, max_length=140)


class ReceivedPixItem(BaseModel):
    """One Pix of the API Pix's `Pix` schema: the fields Tucano reads (others are kept out)."""

    model_config = ConfigDict(extra="ignore")

    end_to_end_id: str = Field(alias="endToEndId", min_length=1, max_length=32)
    txid: str | None = Field(default=None, max_length=35)
    valor: str = Field(max_length=20, description="The amount, as the PSP writes it: 10.00.")
    devolucoes: list[ReportedRefund] = Field(default_factory=list, max_length=100)


class PixWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pix: list[ReceivedPixItem] = Field(default_factory=list, max_length=1000)


class WebhookReceived(BaseModel):
    received: int = Field(description="How many Pix the request carried.")


def amount_of(item: ReceivedPixItem) -> Decimal | None:
    try:
        amount = Decimal(item.valor)
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None


# Some PSPs glue `/pix` to the end of the registered URL, inside its query: the registered path
# itself, and the secret with `/pix` after it, are read as the same webhook.
@router.post("/webhook", include_in_schema=False)
@router.post(
    "/webhook/pix",
    summary="The PSP's webhook: Pix received (api-pix)",
    description="Where the merchant's PSP posts the Pix its charges received, registered with "
    "`tucano pix webhook register`. Accepted only with `?hmac=<TUCANO_PIX_WEBHOOK_SECRET>`. Each "
    "Pix whose txid is a link's charge and whose amount is the link's pays that link, with its "
    "`PAYMENT_LINK_INBOUND`, in one transaction; anything else pays nothing and is logged. A Pix "
    "with `devolucoes` reports refunds: each DEVOLVIDO or NAO_REALIZADO one that is a link's "
    "refund ends it, with its events.",
    response_model=WebhookReceived,
    responses={401: {"description": "The hmac is missing or wrong."}},
)
async def receive_pix(
    body: PixWebhook,
    settings: SettingsDep,
    database: DatabaseDep,
    given: str = Query(default="", alias="hmac", max_length=200),
) -> WebhookReceived:
    secret = settings.pix_webhook_secret
    expected = secret.get_secret_value() if secret is not None else ""
    given = given.removesuffix("/pix")
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        log.warning("pix_webhook_refused", reason="hmac missing or wrong", items=len(body.pix))
        raise AppError(ErrorCode.UNAUTHENTICATED, errors=["the webhook's hmac is missing or wrong"])
    for item in body.pix:
        if item.devolucoes:
            # A notice about refunds of a Pix received before: its payment was settled then.
            async with database.session() as session:
                for reported in item.devolucoes:
                    await settle_reported_refund(
                        session,
                        psp_id=reported.id,
                        status=reported.status,
                        devolution_id=reported.rtr_id,
                        reason=reported.motivo,
                    )
                await session.commit()
            continue
        amount = amount_of(item)
        if item.txid is None or amount is None:
            log.warning("pix_payment_without_charge", endToEndId=item.end_to_end_id)
            continue
        async with database.session() as session:
            received = ReceivedPix(end_to_end_id=item.end_to_end_id, amount=amount)
            await settle(session, txid=item.txid, received=received, source="webhook")
            await session.commit()
    return WebhookReceived(received=len(body.pix))
