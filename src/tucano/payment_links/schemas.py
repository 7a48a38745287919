"""Payment-link bodies (B1-B4) as they go over the wire."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from enum import IntEnum
from typing import Annotated, Literal

from pydantic import Field, StrictInt, StringConstraints, field_validator

from tucano.brazil.documents import parse_registration_number
from tucano.money import Money, from_cents
from tucano.payment_links.checkout_tokens import issue_checkout_token
from tucano.payment_links.installments import MAX_INSTALLMENTS, installment_options
from tucano.payment_links.models import Payment, PaymentLink
from tucano.wire import ApiModel, UtcTimestamp

StatusName = Literal["CREATED", "PAID", "EXPIRED"]
STATUS_CODES: dict[str, int] = {"CREATED": 1, "PAID": 2, "EXPIRED": 3}


class PaymentMethod(IntEnum):
    CREDIT_CARD = 1
    PIX = 2


METHOD_CARD = PaymentMethod.CREDIT_CARD
METHOD_PIX = PaymentMethod.PIX
METHOD_NAMES = {METHOD_CARD: "CREDIT_CARD", METHOD_PIX: "PIX"}

PayerName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
Days = Annotated[StrictInt, Field(ge=1, le=10)]
Installments = Annotated[StrictInt, Field(ge=1, le=MAX_INSTALLMENTS)]


class PaymentLinkCreate(ApiModel):
    payer_name: PayerName = Field(description="1 to 100 characters.")
    registration_number: str = Field(
        description="The payer's CPF or CNPJ (the alphanumeric CNPJ included); punctuation is "
        "accepted and stripped.",
        examples=["529.982.247-25", "12.ABC.345/01DE-35"],
    )
    amount: Money = Field(description="0.01 to 999999999.99, at most two decimals.")
    numbers_installments: Installments = Field(
        description="Most card instalments offered, 1 to 10."
    )
    expiration_days: Days = Field(description="Validity in days, 1 to 10.")
    description: Annotated[str, StringConstraints(max_length=140)] | None = None
    user_reference: Annotated[str, StringConstraints(max_length=77)] | None = Field(
        default=None, description="Your own reference, for tracking and filtering."
    )

    @field_validator("registration_number", mode="before")
    @classmethod
    def _document(cls, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError("must be a string")
        return parse_registration_number(value)


class LinkStatus(ApiModel):
    code: int = Field(description="1 CREATED, 2 PAID, 3 EXPIRED.")
    description: StatusName


class InstallmentOption(ApiModel):
    number_installments: int
    amount_installment: Decimal = Field(description="amount / numberInstallments, half-up.")


class LinkPayment(ApiModel):
    payment_method: int = Field(description="1 credit card, 2 PIX.")
    payment_id: str
    payment_receipt: str = Field(description="PIX end-to-end id, or the card NSU.")
    payment_date: UtcTimestamp
    installments: int
    amount: Decimal


class PaymentLinkOut(ApiModel):
    """A payment link, as every operation answers it."""

    link_payment_uuid: uuid.UUID
    payer_name: str
    registration_number: str
    amount: Decimal
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


def status_at(link: PaymentLink, now: datetime) -> StatusName:
    """The status a reader sees: a CREATED link is EXPIRED from its expiration moment on."""
    if link.status == "PAID":
        return "PAID"
    return "EXPIRED" if now >= link.expires_at else "CREATED"


def present_link(
    link: PaymentLink,
    payment: Payment | None,
    *,
    now: datetime,
    public_url: str,
    checkout_key: bytes,
) -> PaymentLinkOut:
    status = status_at(link, now)
    amount = from_cents(link.amount_cents)
    token = issue_checkout_token(link.uuid, expires_at=link.expires_at, key=checkout_key)
    return PaymentLinkOut(
        link_payment_uuid=link.uuid,
        payer_name=link.payer_name,
        registration_number=link.registration_number,
        amount=amount,
        numbers_installments=link.numbers_installments,
        status=LinkStatus(code=STATUS_CODES[status], description=status),
        url_payment=f"{public_url}/checkout/{link.uuid}?token={token}",
        description=link.description,
        verification_token=link.verification_token,
        installments_options=[
            InstallmentOption(number_installments=n, amount_installment=each)
            for n, each in installment_options(amount, link.numbers_installments)
        ],
        user_reference=link.user_reference,
        creation_date=link.created_at,
        expiration_days=link.expiration_days,
        expiration_date=link.expires_at,
        payment=None
        if payment is None
        else LinkPayment(
            payment_method=payment.method,
            payment_id=payment.payment_id,
            payment_receipt=payment.payment_receipt,
            payment_date=payment.paid_at,
            installments=payment.installments,
            amount=from_cents(payment.amount_cents),
        ),
    )


def expiration_of(created_at: datetime, days: int) -> datetime:
    return created_at + timedelta(days=days)


# --- the report (B4) ----------------------------------------------------------------------


class StatusTotal(ApiModel):
    status: StatusName
    count: int
    amount: Decimal


class MethodTotal(ApiModel):
    payment_method: int = Field(description="1 credit card, 2 PIX.")
    count: int
    amount: Decimal


class DayTotal(ApiModel):
    date: str = Field(description="A UTC day of creationDate, YYYY-MM-DD.")
    count: int
    amount: Decimal


class PaymentLinkReport(ApiModel):
    """Totals over every link that matches the filters (not one page)."""

    start_date: UtcTimestamp
    end_date: UtcTimestamp
    total_count: int
    total_amount: Decimal
    by_status: list[StatusTotal]
    by_payment_method: list[MethodTotal] = Field(description="Paid links, by how they were paid.")
    by_day: list[DayTotal]
