"""Realistic sample payloads for sandbox test events (POST /webhook/v1/test-events)."""

from __future__ import annotations

import random
import secrets
import uuid
from datetime import timedelta
from decimal import Decimal

from tucano.brazil.documents import random_cnpj, random_cpf
from tucano.brazil.pix import SANDBOX_ISPB, new_end_to_end_id, new_txid
from tucano.core.clock import clock
from tucano.events.payloads import (
    CardChargeback,
    Cardholder,
    CardPaymentInbound,
    CardRecurringInbound,
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


def sample_payload(
    event_type: EventType, *, partner_id: int | None = None, rng: random.Random | None = None
) -> Payload:
    """A payload of `event_type` that looks like the real thing (valid documents, PIX ids in
    their real formats, amounts in cents), marked as a sample by its references."""
    rng = rng or random.Random(secrets.randbits(64))
    now = clock.now()
    amount = Decimal(rng.randrange(100, 500_000)) / 100
    name = rng.choice(_NAMES)
    payer = Party(document_number=random_cpf(rng), name=name)
    e2e = new_end_to_end_id(ispb=SANDBOX_ISPB, at=now, rng=rng)
    brand = rng.choice(_BRANDS)
    last4 = f"{rng.randrange(10000):04d}"
    nsu = f"{rng.randrange(10**9):09d}"
    reference = "sample-" + uuid.UUID(int=rng.getrandbits(128)).hex[:12]
    match event_type:
        case EventType.PAYMENT_LINK_INBOUND:
            return PaymentLinkInbound(
                payment_link_uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                payment_date=now,
                payment_method="PIX",
                payment_id="pay_" + uuid.UUID(int=rng.getrandbits(128)).hex[:20],
                payment_receipt=e2e,
                amount=amount,
                user_reference=reference,
                numbers_installments=None,
                status="PAID",
            )
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
