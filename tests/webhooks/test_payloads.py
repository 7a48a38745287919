"""Event payloads as other systems publish them (POST /internal/v1/events): what each type takes
beyond its canonical form, and what is rendered for merchants."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from tucano import wire
from tucano.webhooks.payloads import CardChargeback, PaymentLinkInbound, PixQrInbound


def rendered(model: Any) -> dict[str, Any]:
    return dict(orjson.loads(wire.dumps(model)))


def pix_qr(**changes: Any) -> dict[str, Any]:
    # The fields decisions.md names, filled the way an integrator would.
    return {
        "txid": "abc123",
        "amount": 10.5,
        "payer": {"documentNumber": "529.982.247-25", "name": "Ana"},
        "endToEndId": "E12345678202601151030abcdefghijk",
        "type": "PAYMENT",
        "status": "PAID",
        "paymentDate": "2026-01-15T10:30:00.000Z",
        "userReference": "order-1",
        **changes,
    }


def chargeback(**changes: Any) -> dict[str, Any]:
    return {
        "creditCardId": 987654,
        "amount": "120.00",
        "identificationTransaction": "TX-1",
        "cancelationDate": "2026-01-20T12:00:00.000Z",
        "transactionDate": "2026-01-02T09:15:00.000Z",
        "description": "not recognised",
        "numbersInstallments": 3,
        "recurrenceId": None,
        "additionalData": {"cardholderName": "ANA", "cardholderDocument": "52998224725"},
        **changes,
    }


def test_a_pix_qr_payment_is_taken_as_an_integrator_writes_it() -> None:
    payload = rendered(PixQrInbound.model_validate(pix_qr()))
    assert payload["txid"] == "abc123"  # a static QR's short txid
    assert payload["status"] == "PAID"  # the PIX system's own word
    assert payload["payer"] == {"documentNumber": "52998224725", "name": "Ana"}
    assert payload["amount"] == 10.5 and wire.dumps(payload["amount"]) == b"10.5"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"txid": "abc-123"}, "txid"),
        ({"txid": "a" * 36}, "txid"),
        ({"status": ""}, "status"),
        ({"endToEndId": "E123"}, "endToEndId"),
        ({"type": "PAID"}, "type"),
        ({"payer": {"documentNumber": "123", "name": "Ana"}}, "payer.documentNumber"),
    ],
)
def test_a_pix_qr_payment_still_refuses_what_is_not_one(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        PixQrInbound.model_validate(pix_qr(**changes))
    assert ".".join(str(p) for p in refused.value.errors()[0]["loc"]).startswith(field)


def test_identifiers_written_as_numbers_are_carried_as_text() -> None:
    link = PaymentLinkInbound.model_validate(
        {
            "paymentLinkUuid": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
            "paymentDate": "2026-01-15T10:30:00.000Z",
            "paymentMethod": "CREDIT_CARD",
            "paymentId": 123,
            "paymentReceipt": 456789,
            "amount": 30,
            "userReference": None,
            "numbersInstallments": 3,
            "status": "PAID",
        }
    )
    payload = rendered(link)
    assert payload["paymentId"] == "123" and payload["paymentReceipt"] == "456789"
    assert payload["paymentLinkUuid"] == "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    with pytest.raises(ValidationError):  # true is not an identifier
        PaymentLinkInbound.model_validate({**link.model_dump(by_alias=True), "paymentId": True})


def test_a_chargeback_carries_what_the_card_system_knows_of_the_cardholder() -> None:
    payload = rendered(CardChargeback.model_validate(chargeback()))
    assert payload["creditCardId"] == "987654"
    assert payload["additionalData"] == {
        "cardholderName": "ANA",
        "cardholderDocument": "52998224725",
        "cardholderEmail": None,
        "cardholderPhone": None,
        "cardBrand": None,
        "cardLastDigits": None,
    }
    company = chargeback(
        additionalData={
            "cardholderDocument": "12.345.678/0001-95",
            "cardholderPhone": "+55 11 98765-4321 / 7915",
            "cardholderEmail": "financeiro@padaria.example",
        }
    )
    data = rendered(CardChargeback.model_validate(company))["additionalData"]
    assert data["cardholderDocument"] == "12345678000195"
    assert data["cardholderPhone"] == "+55 11 98765-4321 / 7915"


@pytest.mark.parametrize(
    "additional",
    [
        # No field may be a way to carry a card number: unknown ones are refused, as elsewhere.
        {"cardholderName": "ANA", "cardNumber": "4111 1111 1111 1111"},
        {"pan": 4111111111111111},
        {"cardholderName": {"first": "ANA"}},
        {"cardBrand": "NOTABRAND"},
        {"cardLastDigits": "41111"},
        {"cardholderDocument": "123"},
    ],
)
def test_a_chargeback_refuses_cardholder_fields_it_does_not_know_or_cannot_carry(
    additional: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError):
        CardChargeback.model_validate(chargeback(additionalData=additional))
