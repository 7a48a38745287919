"""The JSON body of each event type, as merchants receive it (documented in OpenAPI `webhooks`).

Dates are ISO 8601 UTC with milliseconds and money a JSON number with two decimals. Payloads that
other systems publish (POST /internal/v1/events) are validated against these models, unknown
fields refused, and re-rendered, so every delivery of a type has the same shape. No model has a
field that could hold a card number: cards are named by brand and last four digits only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictInt,
    ValidationInfo,
    field_validator,
)

from tucano.brazil.documents import normalize_document
from tucano.money import PayloadMoney
from tucano.webhooks.events import EventType
from tucano.wire import ApiModel, ReceivedTimestamp


def _number_as_text(value: Any) -> Any:
    # Other systems write some identifiers as JSON numbers (a paymentId of 123): carried as the
    # text they stand for, so that every delivery of a type has the same shape.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


Timestamp = ReceivedTimestamp
Text = Annotated[str, Field(min_length=1, max_length=200)]
OptionalText = Annotated[str | None, Field(default=None, max_length=200)]
# An identifier: text, or a whole number read as its digits.
Identifier = Annotated[str, BeforeValidator(_number_as_text), Field(min_length=1, max_length=200)]
OptionalIdentifier = Annotated[
    Annotated[str, BeforeValidator(_number_as_text), Field(max_length=200)] | None,
    Field(default=None),
]
EndToEndId = Annotated[
    str,
    Field(
        pattern=r"^[ED][0-9]{8}[0-9]{12}[A-Za-z0-9]{11}$",
        description="PIX end-to-end id (32 characters).",
        examples=["E13935893202601151030A1B2C3D4E5F"],
    ),
]
Document = Annotated[
    str,
    # Written as people write them ("529.982.247-25") or not: carried without punctuation.
    BeforeValidator(lambda v: normalize_document(v) if isinstance(v, str) else v),
    Field(
        pattern=r"^[0-9A-Z]{11}$|^[0-9A-Z]{14}$",
        description="CPF or CNPJ; punctuation accepted and removed.",
    ),
]
CardLastDigits = Annotated[str, Field(pattern=r"^[0-9]{4}$")]
CardBrand = Literal["VISA", "MASTERCARD", "ELO", "AMEX", "HIPERCARD", "DINERS", "DISCOVER", "JCB"]
Installments = Annotated[StrictInt, Field(ge=1, le=24)]


class Payload(ApiModel):
    model_config = ConfigDict(extra="forbid")


class Party(Payload):
    document_number: Document
    name: Text


class PaymentLinkInbound(Payload):
    """A payment link was paid."""

    payment_link_uuid: Annotated[UUID, PlainSerializer(str, return_type=str)]
    payment_date: Timestamp
    payment_method: Literal["PIX", "CREDIT_CARD"]
    payment_id: Identifier
    payment_receipt: Identifier = Field(description="End-to-end id for PIX, NSU for card.")
    amount: PayloadMoney
    user_reference: OptionalText
    numbers_installments: Installments | None = Field(
        default=None, description="Card payments only."
    )
    status: Literal["PAID"]


class PixQrInbound(Payload):
    """A dynamic PIX QR code was paid (or a payment of it refunded)."""

    txid: Annotated[str, BeforeValidator(_number_as_text)] = Field(
        pattern=r"^[A-Za-z0-9]{1,35}$", description="1 to 35 letters and digits (BCB's txid)."
    )
    amount: PayloadMoney
    payer: Party
    end_to_end_id: EndToEndId
    devolution_end_to_end_id: EndToEndId | None = Field(
        default=None, description="Refunds only: the end-to-end id of the devolution."
    )
    type: Literal["PAYMENT", "REFUND"]
    status: Text = Field(
        description="The payment's status as the PIX system reports it: CONFIRMED for a "
        "payment, REFUNDED for a refund in Tucano's samples.",
        examples=["CONFIRMED"],
    )
    payment_date: Timestamp
    user_reference: OptionalText

    @field_validator("type")
    @classmethod
    def _devolution_id_with_refunds_only(cls, value: str, info: ValidationInfo) -> str:
        # Absent from info.data when the id itself was invalid: that error is reported already.
        if "devolution_end_to_end_id" not in info.data:
            return value
        devolution = info.data["devolution_end_to_end_id"]
        if value == "REFUND" and devolution is None:
            raise ValueError("is REFUND, which needs devolutionEndToEndId")
        if value == "PAYMENT" and devolution is not None:
            raise ValueError("is PAYMENT; devolutionEndToEndId is for refunds only")
        return value


class PixQrPartnerInbound(PixQrInbound):
    """A partner's dynamic PIX QR code was paid: PIX_QR_INBOUND plus the partner."""

    partner_id: StrictInt = Field(ge=1)


class PixReceiver(Party):
    pix_key: OptionalText
    bank_ispb: str = Field(pattern=r"^[0-9]{8}$")


class PixOutbound(Payload):
    """An outbound PIX transfer completed, failed or was returned."""

    transfer_id: Identifier
    end_to_end_id: EndToEndId
    amount: PayloadMoney
    receiver: PixReceiver
    status: Literal["COMPLETED", "FAILED", "RETURNED"]
    failure_reason: OptionalText = Field(description="Set when status is FAILED.")
    transfer_date: Timestamp
    description: OptionalText
    user_reference: OptionalText


class CardPaymentInbound(Payload):
    """A credit or debit card payment was approved or denied."""

    transaction_id: Identifier
    nsu: str = Field(pattern=r"^[0-9]{6,12}$")
    authorization_code: str | None = Field(default=None, pattern=r"^[0-9A-Z]{6}$")
    amount: PayloadMoney
    payment_type: Literal["CREDIT", "DEBIT"]
    numbers_installments: Installments
    card_brand: CardBrand
    card_last_digits: CardLastDigits
    status: Literal["APPROVED", "DENIED"]
    transaction_date: Timestamp
    user_reference: OptionalText


class Cardholder(Payload):
    """The cardholder, as the card system knows them: every field optional. Unknown fields are
    refused, as everywhere: none of them may be a way to carry a card number."""

    cardholder_name: OptionalText = None
    cardholder_document: Document | None = None
    cardholder_email: OptionalText = None
    cardholder_phone: OptionalText = None
    card_brand: CardBrand | None = None
    card_last_digits: CardLastDigits | None = None


class CardChargeback(Payload):
    """A cardholder disputed a card payment."""

    credit_card_id: Identifier
    amount: PayloadMoney
    identification_transaction: Identifier
    cancelation_date: Timestamp
    transaction_date: Timestamp
    description: OptionalText
    numbers_installments: Installments
    recurrence_id: OptionalIdentifier = Field(description="Set when the charge was recurring.")
    additional_data: Cardholder


class CardRecurringInbound(Payload):
    """A recurring card charge (a subscription's instalment) was approved or denied."""

    recurrence_id: Identifier
    transaction_id: Identifier
    nsu: str = Field(pattern=r"^[0-9]{6,12}$")
    charge_number: StrictInt = Field(ge=1)
    amount: PayloadMoney
    card_brand: CardBrand
    card_last_digits: CardLastDigits
    status: Literal["APPROVED", "DENIED"]
    charge_date: Timestamp
    next_charge_date: Timestamp | None = None
    user_reference: OptionalText


PAYLOAD_MODELS: dict[EventType, type[Payload]] = {
    EventType.PAYMENT_LINK_INBOUND: PaymentLinkInbound,
    EventType.PIX_QR_INBOUND: PixQrInbound,
    EventType.PIX_QR_PARTNER_INBOUND: PixQrPartnerInbound,
    EventType.PIX_OUTBOUND: PixOutbound,
    EventType.CARD_PAYMENT_INBOUND: CardPaymentInbound,
    EventType.CARD_CHARGEBACK: CardChargeback,
    EventType.CARD_RECURRING_INBOUND: CardRecurringInbound,
}
