"""Realistic sample payloads for sandbox test events (POST /webhook/v1/test-events), and the
examples of the OpenAPI document's `webhooks` section, one per variant of each event type."""

from __future__ import annotations

import random
import secrets
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from tucano.brazil.documents import random_cnpj, random_cpf
from tucano.brazil.pix import SANDBOX_ISPB, new_end_to_end_id, new_txid
from tucano.core.clock import clock
from tucano.core.money import from_cents, to_cents
from tucano.events.payloads import (
    CardChargeback,
    Cardholder,
    CardPaymentInbound,
    CardRecurringInbound,
    LinkRefund,
    Party,
    Payload,
    PaymentLinkInbound,
    PixOutbound,
    PixQrInbound,
    PixQrPartnerInbound,
    PixReceiver,
)
from tucano.events.types import EventType

_NAMES = ["Maria da Silva", "João Pereira", "Ana Souza", "Padaria Estrela Ltda", "Carlos Oliveira"]
_BRANDS = ["VISA", "MASTERCARD", "ELO"]

Variant = Literal[
    "PAID",
    "EXPIRED",
    "CANCELLED",
    "REFUNDED",
    "PARTIALLY_REFUNDED",
    "REFUND_FAILED",
    "PAYMENT",
    "REFUND",
]
_PIX_QR_VARIANTS: tuple[Variant, ...] = ("PAYMENT", "REFUND")
# The variants of a sample (the first one is the default); types not named here have none.
VARIANTS: dict[EventType, tuple[Variant, ...]] = {
    EventType.PAYMENT_LINK_INBOUND: (
        "PAID",
        "EXPIRED",
        "CANCELLED",
        "REFUNDED",
        "PARTIALLY_REFUNDED",
        "REFUND_FAILED",
    ),
    EventType.PIX_QR_INBOUND: _PIX_QR_VARIANTS,
    EventType.PIX_QR_PARTNER_INBOUND: _PIX_QR_VARIANTS,
}
VARIANT_SUMMARIES: dict[Variant, str] = {
    "PAID": "The link was paid.",
    "EXPIRED": "The link expired unpaid (sent once, within a minute of its expiry).",
    "CANCELLED": "Its merchant cancelled the link "
    "(POST /payment-link/v1/{linkPaymentUuid}/cancel).",
    "REFUNDED": "Refunds gave back the whole payment.",
    "PARTIALLY_REFUNDED": "A refund gave back part of the payment.",
    "REFUND_FAILED": "A refund failed: the link's status as it stands (PAID while nothing was "
    "given back, here PARTIALLY_REFUNDED) with refund.status FAILED.",
    "PAYMENT": "The QR code was paid.",
    "REFUND": "A Pix refund (devolution) of its payment succeeded.",
}
SANDBOX_REFUND_FAILURE = "sandbox: a refund whose amount ends in 13 cents fails"


def sample_payload(
    event_type: EventType,
    *,
    variant: Variant | None = None,
    partner_id: int | None = None,
    rng: random.Random | None = None,
    at: datetime | None = None,
    amount: Decimal | None = None,
) -> Payload:
    """A payload of `event_type` (of `variant`, by default the type's first) that looks like the
    real thing (valid documents, PIX ids in their real formats, amounts in cents), marked as a
    sample by its references; at `at` (by default now) and of `amount` (by default at random)."""
    if variant is not None and variant not in VARIANTS.get(event_type, ()):
        raise ValueError(f"{event_type} has no variant {variant!r}")
    rng = rng or random.Random(secrets.randbits(64))
    now = at or clock.now()
    drawn = Decimal(rng.randrange(100, 500_000)) / 100
    amount = drawn if amount is None else amount
    name = rng.choice(_NAMES)
    payer = Party(document_number=random_cpf(rng), name=name)
    e2e = new_end_to_end_id(ispb=SANDBOX_ISPB, at=now, rng=rng)
    brand = rng.choice(_BRANDS)
    last4 = f"{rng.randrange(10000):04d}"
    nsu = f"{rng.randrange(10**9):09d}"
    reference = "sample-" + uuid.UUID(int=rng.getrandbits(128)).hex[:12]
    match event_type:
        case EventType.PAYMENT_LINK_INBOUND:
            link = {
                "payment_link_uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "amount": amount,
                "user_reference": reference,
            }
            payment_id = "pay_" + uuid.UUID(int=rng.getrandbits(128)).hex[:20]
            if variant in (None, "PAID"):
                return PaymentLinkInbound(
                    **link,
                    payment_date=now,
                    payment_method="PIX",
                    payment_id=payment_id,
                    payment_receipt=e2e,
                    numbers_installments=None,
                    status="PAID",
                )
            if variant in ("EXPIRED", "CANCELLED"):
                return PaymentLinkInbound(**link, status=variant, status_date=now)
            paid_at = _some_days_before(now, rng)
            payment = {
                "payment_date": paid_at,
                "payment_method": "PIX",
                "payment_id": payment_id,
                "payment_receipt": new_end_to_end_id(ispb=SANDBOX_ISPB, at=paid_at, rng=rng),
            }
            return _link_refund(variant, link | payment, amount=amount, now=now, rng=rng)
        case EventType.PIX_QR_INBOUND | EventType.PIX_QR_PARTNER_INBOUND:
            fields = {
                "txid": new_txid(rng),
                "amount": amount,
                "payer": payer,
                "end_to_end_id": e2e,
                "devolution_end_to_end_id": None,
                "type": "PAYMENT",
                "status": "CONFIRMED",
                "payment_date": now,
                "user_reference": reference,
            }
            if variant == "REFUND":
                # The payment's id is of the day it was paid; the devolution's, BCB's D id, of
                # now, the moment the refund succeeded (paymentDate, as Tucano's own say).
                paid_at = _some_days_before(now, rng)
                fields |= {
                    "end_to_end_id": new_end_to_end_id(ispb=SANDBOX_ISPB, at=paid_at, rng=rng),
                    "devolution_end_to_end_id": "D"
                    + new_end_to_end_id(ispb=SANDBOX_ISPB, at=now, rng=rng)[1:],
                    "type": "REFUND",
                    "status": "REFUNDED",
                }
            if event_type is EventType.PIX_QR_PARTNER_INBOUND:
                return PixQrPartnerInbound(**fields, partner_id=partner_id or 1)
            return PixQrInbound(**fields)
        case EventType.PIX_OUTBOUND:
            return PixOutbound(
                transfer_id="trf_" + uuid.UUID(int=rng.getrandbits(128)).hex[:20],
                end_to_end_id=e2e,
                amount=amount,
                receiver=PixReceiver(
                    document_number=random_cnpj(rng),
                    name="Fornecedor Exemplo Ltda",
                    pix_key="financeiro@fornecedor.example.com",
                    bank_ispb="00000000",
                ),
                status="COMPLETED",
                failure_reason=None,
                transfer_date=now,
                description="Pagamento de fornecedor (sample)",
                user_reference=reference,
            )
        case EventType.CARD_PAYMENT_INBOUND:
            return CardPaymentInbound(
                transaction_id="txn_" + uuid.UUID(int=rng.getrandbits(128)).hex[:20],
                nsu=nsu,
                authorization_code=f"{rng.randrange(10**6):06d}",
                amount=amount,
                payment_type="CREDIT",
                numbers_installments=rng.randint(1, 10),
                card_brand=brand,
                card_last_digits=last4,
                status="APPROVED",
                transaction_date=now,
                user_reference=reference,
            )
        case EventType.CARD_CHARGEBACK:
            return CardChargeback(
                credit_card_id="card_" + uuid.UUID(int=rng.getrandbits(128)).hex[:16],
                amount=amount,
                identification_transaction=nsu,
                cancelation_date=now,
                transaction_date=now - timedelta(days=rng.randint(3, 60)),
                description="Cardholder does not recognise the purchase (sample)",
                numbers_installments=1,
                recurrence_id=None,
                additional_data=Cardholder(
                    cardholder_name=name.upper(), card_brand=brand, card_last_digits=last4
                ),
            )
        case EventType.CARD_RECURRING_INBOUND:
            return CardRecurringInbound(
                recurrence_id="rec_" + uuid.UUID(int=rng.getrandbits(128)).hex[:16],
                transaction_id="txn_" + uuid.UUID(int=rng.getrandbits(128)).hex[:20],
                nsu=nsu,
                charge_number=rng.randint(1, 12),
                amount=amount,
                card_brand=brand,
                card_last_digits=last4,
                status="APPROVED",
                charge_date=now,
                next_charge_date=now + timedelta(days=30),
                user_reference=reference,
            )
    raise AssertionError(f"no sample payload for {event_type}")  # pragma: no cover


def _some_days_before(now: datetime, rng: random.Random) -> datetime:
    return now - timedelta(days=rng.randint(1, 20), minutes=rng.randint(1, 1439))


def _link_refund(
    variant: str, fields: dict[str, Any], *, amount: Decimal, now: datetime, rng: random.Random
) -> PaymentLinkInbound:
    """A paid link's event of a refund: REFUNDED (the whole amount given back at once),
    PARTIALLY_REFUNDED (part of it), or REFUND_FAILED (a second refund, of an amount ending in
    13 cents as the sandbox's failing ones do, after a first gave back part)."""
    cents = to_cents(amount)
    part = rng.randint(cents // 10, cents // 2)  # at least 10 cents: amounts are 1.00 or more
    refund_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if variant == "REFUNDED":
        status, refund_cents, refunded_cents, failure = "REFUNDED", cents, cents, None
    elif variant == "PARTIALLY_REFUNDED":
        status, refund_cents, refunded_cents, failure = "PARTIALLY_REFUNDED", part, part, None
    else:
        left = cents - part
        refund_cents = 13 + 100 * rng.randint(0, (left - 13) // 100)
        status, refunded_cents, failure = "PARTIALLY_REFUNDED", part, SANDBOX_REFUND_FAILURE
    return PaymentLinkInbound(
        **fields,
        status=status,
        status_date=now,
        refunded_amount=from_cents(refunded_cents),
        refund=LinkRefund(
            refund_id=refund_id,
            amount=from_cents(refund_cents),
            status="SUCCEEDED" if failure is None else "FAILED",
            failure_reason=failure,
        ),
    )
