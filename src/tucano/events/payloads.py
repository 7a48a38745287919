"""The JSON body of each event type, as merchants receive it (documented in OpenAPI `webhooks`).

Payloads that other systems publish (POST /internal/v1/events) are validated against these models
and delivered as published: Tucano carries events, it does not rewrite them. Two exceptions, the
rules decisions.md sets for every payload: money is written with two decimals and times in UTC
with milliseconds. Fields a model does not name are carried too (the provider's systems may know
more than Tucano does), unless one looks like a card number: no payload carries one (cards are
named by brand and last four digits).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tucano.api.wire import ApiModel, ReceivedTimestamp
from tucano.brazil.documents import normalize_document
from tucano.core.card_numbers import holds_a_card_number
from tucano.core.json_codec import written_path
from tucano.core.money import MoneyOut, PayloadMoney
from tucano.events.types import EventType

_DOCUMENT = re.compile(r"[0-9A-Z]{11}|[0-9A-Z]{14}")


def _a_document(value: str) -> str:
    if not _DOCUMENT.fullmatch(normalize_document(value)):
        raise ValueError("must be a CPF (11 characters) or a CNPJ (14), punctuation aside")
    return value


Timestamp = ReceivedTimestamp
Text = Annotated[str, Field(min_length=1, max_length=200)]
OptionalText = Annotated[str | None, Field(default=None, max_length=200)]
# What JSON carries for a whole number here: larger ones no JSON writer on the way keeps exact.
WholeNumber = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]
PositiveWholeNumber = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
# An identifier in the publishing system: text, or a whole number (delivered as it came).
Identifier = Annotated[Text | WholeNumber, Field(description="Text, or a whole number.")]
OptionalIdentifier = Annotated[Identifier | None, Field(default=None)]
EndToEndId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="PIX end-to-end id (32 characters in BCB's format: E, the ISPB, the date "
        "and time, 11 letters and digits).",
        examples=["E13935893202601151030A1B2C3D4E5F"],
    ),
]
Document = Annotated[
    str,
    Field(
        min_length=11,
        max_length=40,
        description="CPF or CNPJ (the alphanumeric CNPJ included), with or without punctuation.",
        examples=["52998224725"],
    ),
    AfterValidator(_a_document),
]
CardLastDigits = Annotated[str, Field(pattern=r"^[0-9]{4}$")]
CardBrand = Literal["VISA", "MASTERCARD", "ELO", "AMEX", "HIPERCARD", "DINERS", "DISCOVER", "JCB"]
Installments = Annotated[StrictInt, Field(ge=1, le=24)]


# Nesting, and digits written out, that a field no model names may have: a delivery carries it
# as JSON, whose writers stop at a few hundred levels, and writes a number out in full ("1e9" as
# 1000000000), where a few characters could otherwise stand for a billion digits.
DEEPEST_NESTING = 64
LONGEST_NUMBER = 64
_WHOLE = range(-(2**63), 2**63)
PLACES_SHOWN = 10  # problems named in an answer, at most


def _written_length(value: Decimal) -> int:
    """How many digits `value` has written out in full ("0.05" has three, "0E+100" one)."""
    if value.is_zero():
        return 1
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite: the JSON reader refuses NaN and Infinity
    if exponent >= 0:
        return len(digits) + exponent
    return max(len(digits) + exponent, 1) + -exponent


def _problem_of(value: Any) -> str | None:
    """What a value of a field no model names may not be, if anything."""
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        if _written_length(value) > LONGEST_NUMBER:
            return "long"
        if value != value.to_integral_value():
            return "card" if holds_a_card_number(format(value, "f")) else None
        value = int(value)  # a whole number written with a fraction or an exponent
    if isinstance(value, int):
        if value not in _WHOLE:
            return "number"
        value = str(value)
    if isinstance(value, str) and holds_a_card_number(value):
        return "card"
    return None


def _problems_in(value: Any, path: list[str | int]) -> Iterator[tuple[str, str]]:
    """(problem, where) in a value no model names. The path is one list, extended and
    shortened as the walk goes, written out only for a problem found."""
    if len(path) > DEEPEST_NESTING:
        yield "deep", written_path(path[:DEEPEST_NESTING]) + "..."
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if holds_a_card_number(key):
                yield "card key", written_path(path) or "the payload's own keys"
            path.append(key)
            yield from _problems_in(item, path)
            path.pop()
    elif isinstance(value, list):
        for index, item in enumerate(value):
            path.append(index)
            yield from _problems_in(item, path)
            path.pop()
    else:
        problem = _problem_of(value)
        if problem is not None:
            yield problem, written_path(path)


_SAID = {
    "card": "has a card number at {}, which no event may carry (name a card by its brand and "
    "last four digits)",
    "card key": "has a card number as a key in {}, which no event may carry",
    "number": "has a whole number beyond 64 bits at {}, which JSON readers do not keep exact",
    "long": f"has a number longer than {LONGEST_NUMBER} digits written out at {{}}",
    "deep": f"nests more than {DEEPEST_NESTING} levels deep at {{}}",
}


class Payload(ApiModel):
    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _check_what_no_field_names(cls, data: Any) -> Any:
        # Before the fields are read, so that a card number goes no further, whatever else the
        # payload gets wrong. A field given under both its names would leave one of them
        # unread, and delivered beside the other: refused.
        if not isinstance(data, dict):
            return data
        lines = []
        named: set[str] = set()
        for name, field in cls.model_fields.items():
            spellings = {name, field.alias or name}
            if len(spellings & data.keys()) > 1:
                lines.append(f"gives {field.alias} twice (also as {name})")
            named |= spellings
        places: dict[str, list[str]] = {problem: [] for problem in _SAID}
        unnamed = {key: value for key, value in data.items() if key not in named}
        # The walk stops at a few problems: one is enough to refuse, and each place is written
        # out (a payload built to have millions would otherwise cost that many).
        for found, (problem, where) in enumerate(_problems_in(unnamed, []), start=1):
            places[problem].append(where)
            if found == PLACES_SHOWN:
                break
        for problem, shown_places in places.items():
            if shown_places:
                lines.append(_SAID[problem].format(", ".join(shown_places)))
        if lines:
            raise ValueError("; ".join(lines))
        return data


def published(payload: Payload) -> dict[str, Any]:
    """What a payload's deliveries send: the fields it was given (an optional field left out
    stays out), those no model names included."""
    return payload.model_dump(mode="python", by_alias=True, exclude_unset=True)


class Party(Payload):
    document_number: Document
    name: Text


Uuid = Annotated[
    str,
    Field(
        pattern=r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$",
        json_schema_extra={"format": "uuid"},
    ),
]
LinkEventStatus = Literal["PAID", "EXPIRED", "CANCELLED", "REFUNDED", "PARTIALLY_REFUNDED"]


class LinkRefund(Payload):
    """The refund a PAYMENT_LINK_INBOUND of a refund is about."""

    refund_id: Uuid
    amount: PayloadMoney
    status: Literal["PENDING", "SUCCEEDED", "FAILED"]
    failure_reason: OptionalText = Field(description="Set when status is FAILED.")


class PaymentLinkInbound(Payload):
    """A payment link changed state: it was paid (PAID), expired unpaid (EXPIRED), was cancelled
    by its merchant (CANCELLED), or a refund of its payment succeeded (REFUNDED in full,
    PARTIALLY_REFUNDED in part) or failed (the link's status as it stands, with `refund.status`
    FAILED). The payment's fields are set once the link is paid."""

    payment_link_uuid: Uuid
    payment_date: Timestamp | None = Field(default=None, description="Set once paid.")
    payment_method: Literal["PIX", "CREDIT_CARD"] | None = Field(
        default=None, description="Set once paid."
    )
    payment_id: Identifier | None = Field(default=None, description="Set once paid.")
    payment_receipt: Identifier | None = Field(
        default=None, description="End-to-end id for PIX, NSU for card; set once paid."
    )
    amount: PayloadMoney = Field(description="The link's amount.")
    user_reference: OptionalText
    numbers_installments: Installments | None = Field(
        default=None, description="Card payments only."
    )
    status: LinkEventStatus
    status_date: Timestamp | None = Field(
        default=None,
        description="When the link expired, was cancelled, or the refund ended (not on PAID, "
        "whose moment is paymentDate).",
    )
    refunded_amount: Annotated[MoneyOut, Field(ge=0)] = Field(
        default=None,  # type: ignore[assignment]  # left out but on refund events
        description="Refund events: what the link's refunds gave back so far.",
    )
    refund: LinkRefund | None = Field(default=None, description="Refund events only.")

    @model_validator(mode="after")
    def _paid_links_name_their_payment(self) -> PaymentLinkInbound:
        if self.status != "PAID":
            return self
        missing = [
            name
            for name, value in (
                ("paymentDate", self.payment_date),
                ("paymentMethod", self.payment_method),
                ("paymentId", self.payment_id),
                ("paymentReceipt", self.payment_receipt),
            )
            if value is None
        ]
        if missing:
            raise ValueError(f"status PAID needs {', '.join(missing)}")
        return self


class PixQrInbound(Payload):
    """A dynamic PIX QR code was paid (or a payment of it refunded)."""

    txid: Text = Field(description="The QR code's txid (BCB's: up to 35 letters and digits).")
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

    partner_id: PositiveWholeNumber


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
    """The cardholder, as the card system knows them: every field optional; others are carried
    as everywhere, none of them a card number."""

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
    numbers_installments: Installments | None = None
    recurrence_id: OptionalIdentifier = Field(description="Set when the charge was recurring.")
    additional_data: Cardholder | None = None


class CardRecurringInbound(Payload):
    """A recurring card charge (a subscription's instalment) was approved or denied."""

    recurrence_id: Identifier
    transaction_id: Identifier
    nsu: str = Field(pattern=r"^[0-9]{6,12}$")
    charge_number: PositiveWholeNumber
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
