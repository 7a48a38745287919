"""The JSON body of each event type, as merchants receive it (documented in OpenAPI `webhooks`).

Dates are ISO 8601 UTC with milliseconds and money a JSON number with two decimals. Payloads that
other systems publish (POST /internal/v1/events) are validated against these models, unknown
fields refused (but in a chargeback's `additionalData`, the card system's own), and re-rendered,
so every delivery of a type has the same shape. No field is meant for a card number (cards are
named by brand and last four digits only), and those extra cardholder fields may not hold one.
"""

from __future__ import annotations

from decimal import Decimal
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
    model_validator,
)

from tucano.brazil.documents import is_valid_cnpj, normalize_document
from tucano.logs import card_number_candidates
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
    """The cardholder's fields: these three when known, and any others the card system keeps
    (text, numbers, true/false), carried as given. None may hold a card number."""

    model_config = ConfigDict(extra="allow")

    cardholder_name: OptionalText
    card_brand: CardBrand | None = None
    card_last_digits: CardLastDigits | None = None

    @model_validator(mode="after")
    def _no_card_numbers(self) -> Cardholder:
        for name, value in (self.model_extra or {}).items():
            if value is not None and not isinstance(value, str | int | bool | Decimal):
                raise ValueError(f"{name} must be text, a number, true/false or null")
            if isinstance(value, str) and len(value) > 200:
                raise ValueError(f"{name} must have at most 200 characters")
            if isinstance(value, int | Decimal) and not _plain_number(value):
                # 1e20000000 is a few bytes here and twenty million digits once rendered.
                raise ValueError(f"{name} must be a number of at most 30 digits")
            if isinstance(value, str | int) and _holds_a_card_number(str(value)):
                raise ValueError(f"{name} looks like a card number, which no event may carry")
        return self


def _plain_number(value: int | Decimal) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 10**30
    return value.is_finite() and -30 <= value.adjusted() < 30 and len(value.as_tuple().digits) <= 30


def _holds_a_card_number(text: str) -> bool:
    """Whether `text` holds what a card number (PAN) looks like: a run of digits shaped like one
    (see logs), of a card's length for its first digit (Visa 13, 16 or 19; Diners 14; Amex 15;
    any 16 to 19), passing the Luhn check, and not a valid CNPJ. (A CNPJ or a phone number
    such as +55 11 98765-4321 is not refused.)"""
    for run in card_number_candidates(text):
        digits = "".join(c for c in run if c.isdigit())
        if _luhn_valid(digits) and _card_length(digits) and not is_valid_cnpj(digits):
            return True
    return False


def _card_length(digits: str) -> bool:
    length, first = len(digits), digits[0]
    if first not in "23456":
        return False
    return (
        16 <= length <= 19
        or (length == 13 and first == "4")
        or (length == 14 and first == "3")
        or (length == 15 and digits[:2] in ("34", "37"))
    )


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


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
