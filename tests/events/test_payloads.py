"""Event payloads as other systems publish them (POST /internal/v1/events): what each type takes,
and that merchants receive it as published (money with two decimals, times in UTC)."""

from __future__ import annotations

import functools
from decimal import Decimal
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from tucano.core import json_codec
from tucano.deliveries.service import NewEvent
from tucano.events.payloads import (
    CardChargeback,
    CardRecurringInbound,
    PaymentLinkInbound,
    PixQrInbound,
    PixQrPartnerInbound,
    published,
)
from tucano.events.types import EventType
from tucano.ingest.service import publication_fingerprint


def rendered(model: Any) -> dict[str, Any]:
    """The JSON a delivery of this payload sends, parsed."""
    return dict(orjson.loads(json_codec.dumps(published(model))))


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
        "amount": 120.0,
        "identificationTransaction": "TX-1",
        "cancelationDate": "2026-01-20T12:00:00.000Z",
        "transactionDate": "2026-01-02T09:15:00.000Z",
        "description": "not recognised",
        "numbersInstallments": 3,
        "recurrenceId": None,
        "additionalData": {"cardholderName": "ANA", "cardholderDocument": "52998224725"},
        **changes,
    }


def test_a_pix_qr_payment_is_delivered_as_published() -> None:
    assert rendered(PixQrInbound.model_validate(pix_qr())) == pix_qr()
    # Short and long txids, and ids in other spellings, are the publishing system's business.
    for changes in ({"txid": "abc-123"}, {"txid": "a" * 36}, {"endToEndId": "E2E-1"}):
        assert rendered(PixQrInbound.model_validate(pix_qr(**changes))) == pix_qr(**changes)


def test_money_gets_two_decimals_and_times_utc_with_milliseconds() -> None:
    """The two rules decisions.md sets for every payload: the only rewriting there is."""
    payload = published(
        PixQrInbound.model_validate(pix_qr(amount="7", paymentDate="2026-01-15T07:30:00-03:00"))
    )
    text = json_codec.dumps(payload)
    assert b'"amount":7.00' in text
    assert b'"paymentDate":"2026-01-15T10:30:00.000Z"' in text


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"txid": ""}, "txid"),
        ({"status": ""}, "status"),
        ({"endToEndId": ""}, "endToEndId"),
        ({"type": "PAID"}, "type"),
        ({"amount": 10.555}, "amount"),
        ({"paymentDate": "yesterday"}, "paymentDate"),
        ({"payer": {"documentNumber": "123", "name": "Ana"}}, "payer.documentNumber"),
        ({"payer": {"name": "Ana"}}, "payer.documentNumber"),
        (
            {"payer": {"documentNumber": "529\n982\t247\u200325", "name": "Ana"}},
            "payer.documentNumber",
        ),
        (
            {"payer": {"documentNumber": "RN3QNL\u00dfNOPY55", "name": "Ana"}},
            "payer.documentNumber",
        ),
    ],
)
def test_a_pix_qr_payment_still_refuses_what_is_not_one(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        PixQrInbound.model_validate(pix_qr(**changes))
    assert ".".join(str(p) for p in refused.value.errors()[0]["loc"]).startswith(field)


def test_identifiers_are_delivered_as_they_were_written() -> None:
    link = {
        "paymentLinkUuid": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "paymentDate": "2026-01-15T10:30:00.000Z",
        "paymentMethod": "CREDIT_CARD",
        "paymentId": 123,
        "paymentReceipt": "456789",
        "amount": 30,
        "userReference": None,
        "numbersInstallments": 3,
        "status": "PAID",
    }
    assert rendered(PaymentLinkInbound.model_validate(link)) == link
    for bad in ({"paymentId": True}, {"paymentId": ""}, {"paymentLinkUuid": "not-a-uuid"}):
        with pytest.raises(ValidationError):
            PaymentLinkInbound.model_validate({**link, **bad})


def test_an_optional_field_left_out_stays_out() -> None:
    """A payload is delivered with the fields it was published with: no nulls added."""
    minimal = chargeback()
    for optional in ("description", "numbersInstallments", "recurrenceId", "additionalData"):
        del minimal[optional]
    assert rendered(CardChargeback.model_validate(minimal)) == minimal
    payment = pix_qr()
    del payment["userReference"]
    assert "devolutionEndToEndId" not in rendered(PixQrInbound.model_validate(payment))


def test_fields_no_model_names_are_carried_too() -> None:
    """The publishing system may know more of the cardholder (or anything else) than Tucano."""
    payload = chargeback(
        additionalData={"name": "ANA", "document": "12.345.678/0001-95", "cardLastDigits": "1111"},
        channel={"kind": "ECOMMERCE", "ids": [1, 2]},
    )
    assert rendered(CardChargeback.model_validate(payload)) == payload


@pytest.mark.parametrize(
    "additional",
    [
        # No field, named by a model or not, may carry a card number.
        {"cardholderName": "ANA", "cardNumber": "4111 1111 1111 1111"},
        {"pan": 4111111111111111},
        {"card": {"numbers": ["5555-5555-5555-4444"]}},
        # The fields a model names keep their rules.
        {"cardholderName": {"first": "ANA"}},
        {"cardBrand": "NOTABRAND"},
        {"cardLastDigits": "41111"},
        {"cardholderDocument": "123"},
    ],
)
def test_a_chargeback_refuses_card_numbers_and_fields_it_cannot_carry(
    additional: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError):
        CardChargeback.model_validate(chargeback(additionalData=additional))


def test_a_long_number_that_is_not_a_card_number_is_carried() -> None:
    # 16 digits whose Luhn check fails: an order number, say.
    payload = chargeback(orderNumber=4111111111111112, reference="1234 5678 9012 3456")
    assert rendered(CardChargeback.model_validate(payload)) == payload


def test_the_same_publication_has_the_same_fingerprint_however_spelt() -> None:
    def fingerprint(payload: dict[str, Any]) -> str:
        return publication_fingerprint(
            NewEvent(1, EventType.CARD_CHARGEBACK, CardChargeback.model_validate(payload))
        )

    first = chargeback(channel={"a": 1, "b": 2}, extra="x")
    reordered = dict(reversed(list(chargeback(channel={"b": 2, "a": 1}, extra="x").items())))
    assert fingerprint(first) == fingerprint({**reordered, "amount": "120.00"})
    without = chargeback()
    del without["description"]
    assert fingerprint(without) != fingerprint(chargeback(description=None))


def link_payment(**changes: Any) -> dict[str, Any]:
    return {
        "paymentLinkUuid": "6f9619ff-8b86-d011-b42d-00c04fc964ff",
        "paymentDate": "2026-01-15T10:30:00.000Z",
        "paymentMethod": "PIX",
        "paymentId": "p1",
        "paymentReceipt": "E12345678202601151030abcdefghijk",
        "amount": 1.01,
        "status": "PAID",
        **changes,
    }


@pytest.mark.parametrize(
    "changes",
    [
        # A field under both its names: one would be unread and delivered beside the other.
        {"payment_id": "4111111111111111"},
        {"payment_id": "p2"},
        # Card numbers wherever no model names the field: as a key, inside text, as a number
        # written with a fraction of zero.
        {"extra": {"4111111111111111": 1}},
        {"4111 1111 1111 1111": "x"},
        {"note": "card 4111-1111-1111-1111 declined"},
        {"amountSeen": Decimal("4111111111111111.0")},
        # Numbers a few characters of JSON write out as a billion digits.
        {"huge": Decimal("1e999999999")},
        {"tiny": [Decimal("1e-999999999")]},
        # Whole numbers that JSON readers do not keep exact.
        {"paymentId": 2**63},
        {"paymentId": -(2**63) - 1},
        {"big": [1, 2**70]},
    ],
)
def test_what_no_field_should_carry_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PaymentLinkInbound.model_validate(link_payment(**changes))


def test_a_nested_field_under_both_its_names_is_refused() -> None:
    payer = {"documentNumber": "52998224725", "document_number": "11144477735", "name": "Ana"}
    with pytest.raises(ValidationError, match="gives documentNumber twice"):
        PixQrInbound.model_validate(pix_qr(payer=payer))


def test_a_payment_link_uuid_is_written_the_usual_way() -> None:
    for spelling in (
        "urn:uuid:6f9619ff-8b86-d011-b42d-00c04fc964ff",
        "{6f9619ff-8b86-d011-b42d-00c04fc964ff}",
        "6f9619ff8b86d011b42d00c04fc964ff",
    ):
        with pytest.raises(ValidationError):
            PaymentLinkInbound.model_validate(link_payment(paymentLinkUuid=spelling))
    largest = link_payment(
        paymentId=2**63 - 1,
        note="order 12345678901234567890 ok",
        rate=Decimal("0.125"),
        long=Decimal("1e18"),
    )
    assert rendered(PaymentLinkInbound.model_validate(largest)) == largest


@pytest.mark.parametrize(
    "text",
    [
        "+55 11 98765-4325",  # a phone number (its 13 digits pass the Luhn check)
        "5511 9876 5432",  # twelve digits
        "E12345678202601151030abcdefghijk",  # twenty digits in a row inside an id
    ],
)
def test_numbers_that_are_not_card_numbers_are_carried(text: str) -> None:
    payload = link_payment(contact=text)
    assert rendered(PaymentLinkInbound.model_validate(payload)) == payload


@pytest.mark.parametrize(
    "text",
    ["4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111", "3782 822463 10005"],
)
def test_card_numbers_as_cards_print_them_are_refused(text: str) -> None:
    with pytest.raises(ValidationError, match="card number"):
        PaymentLinkInbound.model_validate(link_payment(contact=f"paid with {text}."))


@pytest.mark.parametrize(
    "value",
    [
        1795534104009,  # a time in milliseconds whose 13 digits pass the Luhn check
        "5511987654325",  # a phone number with its country code, the same
        1234567890123452,  # sixteen digits starting with 1: no card network's
        [[[[[["deep enough"]]]]]],
    ],
)
def test_ordinary_values_are_carried(value: Any) -> None:
    payload = link_payment(extra=value)
    assert rendered(PaymentLinkInbound.model_validate(payload)) == payload


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("4111.1111.1111.1111", "card number at extra"),
        ("\uff14\uff11\uff11\uff11" + "\uff11" * 12, "card number at extra"),  # fullwidth
        ("4111\u00a01111\u00a01111\u00a01111", "card number at extra"),  # non-breaking spaces
        ({"4111111111111111": "x"}, "card number as a key in extra"),
        # List items are named as every other error names them (pydantic, the body reader).
        ({"cards": ["ok", "4111 1111 1111 1111"]}, "card number at extra.cards[1]"),
        ([{"4111111111111111": 1}], "card number as a key in extra[0]"),
        (Decimal("1e30"), "whole number beyond 64 bits at extra"),
        (-(2**63) - 1, "whole number beyond 64 bits at extra"),
        (Decimal("9" * 4001), "longer than 64 digits"),
        (functools.reduce(lambda inner, _: [inner], range(70), 1), "nests more than 64 levels"),
    ],
)
def test_each_refusal_says_what_and_where(value: Any, said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        PaymentLinkInbound.model_validate(link_payment(extra=value))
    (error,) = refused.value.errors()
    assert said in error["msg"]
    # What the answer says (errors.validation_lines): a card number is not repeated in it.
    assert "4111111111111111" not in error["msg"]


@pytest.mark.parametrize(
    ("model", "payload"),
    [
        (PixQrPartnerInbound, {"partnerId": 0}),
        (CardRecurringInbound, {"chargeNumber": -1}),
    ],
)
def test_counts_and_partner_ids_start_at_one(model: Any, payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as refused:
        model.model_validate(payload)
    field = next(iter(payload))
    assert any(error["loc"] == (field,) for error in refused.value.errors())


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1111 123",  # a card and its security code
        "2024 4111 1111 1111 1111",  # a year, then the card
        "4111-1111-1111-1111-999",
        "paid 4111111111111111.5",
    ],
)
def test_a_card_number_beside_other_digits_is_found(text: str) -> None:
    with pytest.raises(ValidationError, match="card number"):
        PaymentLinkInbound.model_validate(link_payment(memo=text))
    with pytest.raises(ValidationError, match="card number"):
        PaymentLinkInbound.model_validate(link_payment(amountSeen=Decimal("4111111111111111.5")))


@pytest.mark.parametrize(
    "value",
    [
        "63383683000123",  # a CNPJ written without punctuation (its digits pass the Luhn check)
        "39042486000166",  # the same, starting as a Diners card does
        "07c45cfb-5536-4934-8462-1452e39a3595",  # a UUID whose middle groups pass the check
        "BR51 6070 1190 3148 2425 5465 8461 C",  # an IBAN, the same
        "20260115000008",  # a date and time written as digits, the same
        "1" * 63 + ".5",  # 64 digits written out
        Decimal("1" * 63 + ".5"),
        Decimal("0E+100"),  # zero
    ],
)
def test_values_of_brazilian_systems_are_carried(value: Any) -> None:
    payload = link_payment(extra=value)
    assert PaymentLinkInbound.model_validate(payload).model_extra == {"extra": value}


def test_a_payload_with_many_problems_is_refused_quickly_and_briefly() -> None:
    payload = link_payment(**{"k" * 100_000: {"cards": ["4111111111111111"] * 10_000}})
    with pytest.raises(ValidationError) as refused:
        PaymentLinkInbound.model_validate(payload)
    (error,) = refused.value.errors()
    assert error["msg"].count(".cards[") == 10  # ten places named, no more
    assert len(error["msg"]) < 1000  # long keys are cut


def test_a_long_key_is_cut_without_showing_a_card_number() -> None:
    # Whole, the key holds twenty digits in a row (no card); cut to 37 characters, it would
    # end with exactly one.
    key = "x" * 21 + "4111111111111111" + "9999"
    with pytest.raises(ValidationError) as refused:
        PaymentLinkInbound.model_validate(link_payment(**{key: {"a": "4111111111111111"}}))
    (error,) = refused.value.errors()
    assert "has a card number at (a key holding a card number).a" in error["msg"]
    assert "4111111111111111" not in error["msg"]
