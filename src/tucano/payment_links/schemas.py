"""Payment-link bodies (B1-B4) as they go over the wire."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, Literal, NamedTuple, Protocol

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictInt,
    StringConstraints,
    field_validator,
)

from tucano.api.wire import ApiModel, UtcTimestamp
from tucano.brazil.documents import parse_registration_number
from tucano.core.card_numbers import holds_a_card_number
from tucano.core.money import Money, MoneyOut, from_cents
from tucano.core.plain_text import BLANK, FORMAT_CHARACTERS, has_format_characters, shows_nothing
from tucano.payment_links.checkout_tokens import issue_checkout_token
from tucano.payment_links.domain import (
    MAX_INSTALLMENTS,
    STATUS_CODES,
    StatusName,
    installment_options,
    status_at,
)

# Line and paragraph separators end a line as \n does, in a CSV cell or a log line alike.
_LINE_SEPARATORS = frozenset("\u2028\u2029")


def _plain_text(value: object) -> object:
    """A text field of a link: one line of what people write, nothing that hides or fakes what
    it shows, and no card number (a link's text is stored, shown and exported as it is)."""
    if not isinstance(value, str):
        return value
    if any(c in _LINE_SEPARATORS or unicodedata.category(c) == "Cc" for c in value):
        raise ValueError("must not hold control characters (a line break, a tab, ...)")
    if holds_a_card_number(value):
        raise ValueError(
            "has a card number, which no payment link may carry (name a card by its brand "
            "and last four digits)"
        )
    if has_format_characters(value):
        raise ValueError(FORMAT_CHARACTERS)
    return value


def _visible(value: str) -> str:
    if shows_nothing(value):
        raise ValueError(BLANK)
    return value


# The checks on the text as sent (before a name is trimmed), then, once trimmed and measured,
# that something is left to see.
PlainText = BeforeValidator(_plain_text)
Visible = AfterValidator(_visible)
PayerName = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100), PlainText, Visible
]
Days = Annotated[StrictInt, Field(ge=1, le=10)]
Installments = Annotated[StrictInt, Field(ge=1, le=MAX_INSTALLMENTS)]


class PaymentLinkCreate(ApiModel):
    payer_name: PayerName = Field(
        description="1 to 100 characters; no control characters, invisible formatting "
        "characters (Unicode Cf) or card numbers, and something to see (as in description and "
        "userReference)."
    )
    registration_number: str = Field(
        description="The payer's CPF or CNPJ (the alphanumeric CNPJ included); punctuation is "
        "accepted and stripped.",
        examples=["529.982.247-25", "12.ABC.345/01DE-35"],
    )
    amount: Money
    numbers_installments: Installments = Field(
        description="Most card instalments offered, 1 to 10."
    )
    expiration_days: Days = Field(description="Validity in days, 1 to 10.")
    description: Annotated[str, StringConstraints(max_length=140), PlainText, Visible] | None = None
    user_reference: Annotated[str, StringConstraints(max_length=77), PlainText, Visible] | None = (
        Field(default=None, description="Your own reference, for tracking and filtering.")
    )

    @field_validator("registration_number", mode="before")
    @classmethod
    def _document(cls, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError("must be a string")
        return parse_registration_number(value)


class LinkStatus(ApiModel):
    code: int = Field(
        description="1 CREATED, 2 PAID (refunded in part included), 3 EXPIRED, 4 CANCELLED, "
        "5 REFUNDED (in full)."
    )
    description: StatusName


RefundStatusName = Literal["PENDING", "SUCCEEDED", "FAILED"]


class RefundCreate(ApiModel):
    """A refund of a PAID link; both fields optional."""

    amount: Money | None = Field(
        default=None,
        description="What to give back, 0.01 up to what is left to refund (the default: all "
        "of it).",
    )
    reason: Annotated[str, StringConstraints(max_length=140), PlainText, Visible] | None = Field(
        default=None, description="Why, in up to 140 characters (kept and shown to you only)."
    )


class RefundOut(ApiModel):
    refund_id: uuid.UUID
    amount: MoneyOut
    reason: str | None
    status: RefundStatusName = Field(
        description="PENDING until the card processor or the Pix provider settles it, then "
        "SUCCEEDED or FAILED."
    )
    failure_reason: str | None = Field(description="Why it failed, when it did.")
    created_at: UtcTimestamp
    completed_at: UtcTimestamp | None = Field(description="When it succeeded or failed.")


class RefundFields(Protocol):
    uuid: uuid.UUID
    amount_cents: int
    reason: str | None
    status: str
    failure_reason: str | None
    created_at: datetime
    completed_at: datetime | None


def refund_document(refund: RefundFields) -> dict[str, Any]:
    """A refund as every operation answers it (the RefundOut shape)."""
    return {
        "refundId": str(refund.uuid),
        "amount": from_cents(refund.amount_cents),
        "reason": refund.reason,
        "status": refund.status,
        "failureReason": refund.failure_reason,
        "createdAt": refund.created_at,
        "completedAt": refund.completed_at,
    }


class InstallmentOption(ApiModel):
    number_installments: int
    amount_installment: MoneyOut = Field(description="amount / numberInstallments, half-up.")


class LinkPayment(ApiModel):
    payment_method: int = Field(description="1 credit card, 2 PIX.")
    payment_id: str
    payment_receipt: str = Field(description="PIX end-to-end id, or the card NSU.")
    payment_date: UtcTimestamp
    installments: int
    amount: MoneyOut


class PaymentLinkOut(ApiModel):
    """A payment link, as every operation answers it."""

    link_payment_uuid: uuid.UUID
    payer_name: str
    registration_number: str
    amount: MoneyOut
    numbers_installments: int
    status: LinkStatus
    url_payment: str = Field(description="Checkout address, with a signed token.")
    description: str | None
    verification_token: int = Field(
        description="Six digits, shown on the checkout page so the payer can confirm the link."
    )
    installments_options: list[InstallmentOption]
    user_reference: str | None
    creation_date: UtcTimestamp
    expiration_days: int
    expiration_date: UtcTimestamp
    payment: LinkPayment | None = Field(description="Set once the link is paid.")
    refunded_amount: MoneyOut = Field(
        description="What the link's SUCCEEDED refunds gave back (0.00 when none)."
    )
    refunds: list[RefundOut] = Field(description="The link's refunds, oldest first.")


class LinkFields(Protocol):
    """What a link shows: a PaymentLink, or a row read with the same column names."""

    uuid: uuid.UUID
    payer_name: str
    registration_number: str
    amount_cents: int
    numbers_installments: int
    status: str
    description: str | None
    verification_token: int
    user_reference: str | None
    created_at: datetime
    expiration_days: int
    expires_at: datetime
    refunded_cents: int


class PaymentView(NamedTuple):
    """A link's payment as shown (read from the payments table by the service)."""

    method: int
    payment_id: str
    payment_receipt: str
    paid_at: datetime
    installments: int
    amount_cents: int


@lru_cache(maxsize=8192)
def _checkout_url(public_url: str, link_uuid: uuid.UUID, expires_at: datetime, key: bytes) -> str:
    # The token is the same on every read of a link: signed once, remembered.
    token = issue_checkout_token(link_uuid, expires_at=expires_at, key=key)
    return f"{public_url}/checkout/{link_uuid}?token={token}"


def link_document(
    link: LinkFields,
    payment: PaymentView | None,
    refunds: Sequence[RefundFields] = (),
    *,
    now: datetime,
    public_url: str,
    checkout_key: bytes,
) -> dict[str, Any]:
    """A link as every operation answers it: the PaymentLinkOut shape, built as the JSON
    document itself (Decimals and datetimes rendered by wire.dumps). Built directly rather than
    through the model because it is on every create, read and list; a property test holds the two
    to the same shape."""
    status = status_at(link, now)
    cents = link.amount_cents
    return {
        "linkPaymentUuid": str(link.uuid),
        "payerName": link.payer_name,
        "registrationNumber": link.registration_number,
        "amount": from_cents(cents),
        "numbersInstallments": link.numbers_installments,
        "status": {"code": STATUS_CODES[status], "description": status},
        "urlPayment": _checkout_url(public_url, link.uuid, link.expires_at, checkout_key),
        "description": link.description,
        "verificationToken": link.verification_token,
        "installmentsOptions": [
            {"numberInstallments": n, "amountInstallment": each}
            for n, each in installment_options(cents, link.numbers_installments)
        ],
        "userReference": link.user_reference,
        "creationDate": link.created_at,
        "expirationDays": link.expiration_days,
        "expirationDate": link.expires_at,
        "payment": None
        if payment is None
        else {
            "paymentMethod": payment.method,
            "paymentId": payment.payment_id,
            "paymentReceipt": payment.payment_receipt,
            "paymentDate": payment.paid_at,
            "installments": payment.installments,
            "amount": from_cents(payment.amount_cents),
        },
        "refundedAmount": from_cents(link.refunded_cents or 0),
        "refunds": [refund_document(refund) for refund in refunds],
    }


# --- the report (B4) ----------------------------------------------------------------------


class StatusTotal(ApiModel):
    status: StatusName
    count: int
    amount: MoneyOut
    refunded_amount: MoneyOut = Field(description="What refunds of these links gave back.")


class MethodTotal(ApiModel):
    payment_method: int = Field(description="1 credit card, 2 PIX.")
    count: int
    amount: MoneyOut
    refunded_amount: MoneyOut = Field(description="What refunds of these links gave back.")


class DayTotal(ApiModel):
    date: str = Field(
        description="A day of creationDate in Brasília time (America/Sao_Paulo), YYYY-MM-DD.",
        json_schema_extra={"format": "date"},
    )
    count: int
    amount: MoneyOut


class PaymentLinkReport(ApiModel):
    """Totals over every link that matches the filters (not one page)."""

    start_date: UtcTimestamp
    end_date: UtcTimestamp
    total_count: int
    total_amount: MoneyOut
    refunded_amount: MoneyOut = Field(
        description="What the SUCCEEDED refunds of the matched links gave back, in all."
    )
    by_status: list[StatusTotal]
    by_payment_method: list[MethodTotal] = Field(description="Paid links, by how they were paid.")
    by_day: list[DayTotal]
