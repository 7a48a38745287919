"""The payment-link forms read as the API reads its bodies: amounts as people type them in
either language, and the schema's problems said next to each field."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tucano.portal.payment_link_forms import amount_text, read_create, read_refund


@pytest.mark.parametrize(
    ("typed", "portuguese", "english"),
    [
        ("1.234,56", "1234.56", "1234.56"),
        ("1,234.56", "1234.56", "1234.56"),
        ("R$ 150,00", "150.00", "150.00"),
        ("150.5", "150.5", "150.5"),
        ("1.234", "1234", "1.234"),  # a thousand in Portuguese; decimals the schema refuses
        ("1,234", "1.234", "1234"),
        ("10,5", "10.5", "10.5"),
        ("dez", "dez", "dez"),
    ],
)
def test_an_amount_is_read_as_its_language_writes_it(
    typed: str, portuguese: str, english: str
) -> None:
    assert amount_text(typed, "pt-BR") == portuguese
    assert amount_text(typed, "en") == english


def test_a_valid_form_gives_the_apis_body_and_keeps_its_key() -> None:
    key = "0b6f1f44-5a4f-4a39-9d4a-0d4c0b6b3f3e"
    data, state = read_create(
        {
            "payerName": " Ana ",
            "registrationNumber": "529.982.247-25",
            "amount": "1.234,5",
            "numbersInstallments": "3",
            "expirationDays": "5",
            "description": "",
            "key": key,
        },
        "pt-BR",
    )
    assert data is not None and state.errors == {} and state.key == key
    assert data.payer_name == "Ana" and data.amount == Decimal("1234.50")
    assert data.registration_number == "52998224725"
    assert data.description is None and data.user_reference is None


def test_each_field_gets_its_own_problem_in_the_pages_language() -> None:
    data, state = read_create(
        {"payerName": "", "amount": "0,001", "numbersInstallments": "0", "expirationDays": "x"},
        "pt-BR",
    )
    assert data is None
    assert state.errors == {
        "payerName": "Preencha este campo.",
        "registrationNumber": "Preencha este campo.",
        "amount": "Deve ser pelo menos 0,01.",
        "numbersInstallments": "Deve ser pelo menos 1.",
        "expirationDays": "Informe um número inteiro.",
    }
    _, english = read_refund({"amount": "1000000000", "reason": "x" * 141}, "en")
    assert english.errors == {
        "amount": "Must be at most 999999999.99.",
        "reason": "Use at most 140 characters.",
    }


def test_a_card_number_typed_in_a_field_is_refused_and_not_shown_again() -> None:
    _, state = read_refund({"amount": "10", "reason": "4111 1111 1111 1111"}, "en")
    assert state.errors["reason"].startswith("Has a card number")
    assert state.values == {"amount": "10", "reason": ""}
