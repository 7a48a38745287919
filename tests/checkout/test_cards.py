"""The card form's rules as pure functions: brands from the number, Luhn, lengths, security
codes, expiry; and a card's repr never shows its number or code."""

from __future__ import annotations

import json
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.checkout.cards import (
    BRAND_RANGES,
    CardBrand,
    CardDetails,
    CardProblem,
    card_brand,
    passes_luhn,
    read_card,
)
from tucano.checkout.page import brand_table
from tucano.checkout.texts import EN, PT

TODAY = date(2026, 12, 1)


def luhn_complete(body: str) -> str:
    """`body` plus the check digit that makes it pass Luhn."""
    for digit in "0123456789":
        if passes_luhn(body + digit):
            return body + digit
    raise AssertionError(body)


@pytest.mark.parametrize(
    ("number", "brand"),
    [
        ("4242424242424242", CardBrand.VISA),
        ("4000000000000002", CardBrand.VISA),
        ("5555555555554444", CardBrand.MASTERCARD),
        ("2223003122003222", CardBrand.MASTERCARD),  # the 2-series
        ("378282246310005", CardBrand.AMEX),
        ("371449635398431", CardBrand.AMEX),
        ("6062825624254001", CardBrand.HIPERCARD),
        ("3841001111222233", CardBrand.HIPERCARD),  # inside Diners' 38 range
        ("6362970000457013", CardBrand.ELO),
        ("4011788888888888", CardBrand.ELO),  # inside Visa's 4 range
        ("5067224275805500", CardBrand.ELO),
        ("6504850000000000", CardBrand.ELO),  # inside Discover's 65 range
        ("36227206271667", CardBrand.DINERS),
        ("6011111111111117", CardBrand.DISCOVER),
        ("3530111333300000", CardBrand.JCB),
    ],
)
def test_the_brand_is_recognised_from_the_number(number: str, brand: CardBrand) -> None:
    assert card_brand(number) is brand


@pytest.mark.parametrize("number", ["", "42", "12345678901234", "9999999999999995"])
def test_a_number_no_brand_issues_has_none(number: str) -> None:
    assert card_brand(number) is None


def test_luhn_against_published_numbers() -> None:
    for valid in ("4242424242424242", "5555555555554444", "378282246310005", "6011111111111117"):
        assert passes_luhn(valid)
    for invalid in ("4242424242424241", "5555555555554440", "1234567812345678", "42a2", ""):
        assert not passes_luhn(invalid)


@given(st.text(alphabet="0123456789", min_size=12, max_size=18))
def test_luhn_catches_every_single_digit_error(body: str) -> None:
    number = luhn_complete(body)
    assert passes_luhn(number)
    position = len(number) // 2
    for other in "0123456789":
        if other != number[position]:
            assert not passes_luhn(number[:position] + other + number[position + 1 :])


def form(**fields: str) -> dict[str, str]:
    return {
        "card_number": "4242 4242 4242 4242",
        "card_holder": "Maria da Silva",
        "card_expiry": "12/30",
        "card_security_code": "123",
    } | fields


def test_a_valid_form_reads_as_a_card() -> None:
    card = read_card(form(card_holder="  José   D'Ávila  "), today=TODAY)
    assert isinstance(card, CardDetails)
    assert card.number == "4242424242424242" and card.brand is CardBrand.VISA
    assert (card.expiry_month, card.expiry_year) == (12, 2030)
    assert card.holder_name == "José D'Ávila" and card.last4 == "4242"


def test_a_cards_repr_shows_only_its_brand_and_last_four() -> None:
    card = read_card(form(card_security_code="987"), today=TODAY)
    assert isinstance(card, CardDetails)
    for shown in (repr(card), str(card), f"{card!r}", str([card])):
        assert "4242424242424242" not in shown and "987" not in shown
        assert "Visa" in shown and "4242" in shown


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"card_number": ""}, "card_number", CardProblem.NUMBER_MISSING),
        ({"card_number": "4242 4242 4242 4241"}, "card_number", CardProblem.NUMBER_INVALID),
        ({"card_number": "4242 4242 4242"}, "card_number", CardProblem.NUMBER_INVALID),
        # Amex numbers have 15 digits: 16 that pass Luhn are still not one.
        (
            {"card_number": luhn_complete("340000000000000"), "card_security_code": "1234"},
            "card_number",
            CardProblem.NUMBER_INVALID,
        ),
        (
            {"card_number": "\uff14\uff12" * 8},
            "card_number",
            CardProblem.NUMBER_INVALID,
        ),
        ({"card_holder": ""}, "card_holder", CardProblem.HOLDER_MISSING),
        ({"card_holder": "4242424242424242"}, "card_holder", CardProblem.HOLDER_INVALID),
        ({"card_holder": "M"}, "card_holder", CardProblem.HOLDER_INVALID),
        ({"card_expiry": "13/30"}, "card_expiry", CardProblem.EXPIRY_INVALID),
        ({"card_expiry": "00/30"}, "card_expiry", CardProblem.EXPIRY_INVALID),
        ({"card_expiry": "11/26"}, "card_expiry", CardProblem.EXPIRY_PAST),
        # Too far ahead is said as such, not as a wrong format (issue 36).
        ({"card_expiry": "12/2080"}, "card_expiry", CardProblem.EXPIRY_TOO_FAR),
        ({"card_expiry": "01/99"}, "card_expiry", CardProblem.EXPIRY_TOO_FAR),
        ({"card_expiry": "soon"}, "card_expiry", CardProblem.EXPIRY_INVALID),
        ({"card_security_code": "12"}, "card_security_code", CardProblem.SECURITY_CODE_INVALID),
        ({"card_security_code": "1234"}, "card_security_code", CardProblem.SECURITY_CODE_INVALID),
        ({"card_security_code": "12a"}, "card_security_code", CardProblem.SECURITY_CODE_INVALID),
    ],
)
def test_each_problem_is_named_by_its_field(
    fields: dict[str, str], field: str, problem: CardProblem
) -> None:
    problems = read_card(form(**fields), today=TODAY)
    assert problems == {field: problem}


def test_american_express_takes_four_digits_of_security_code_and_only_four() -> None:
    amex = {"card_number": "3782 822463 10005"}
    assert isinstance(read_card(form(**amex, card_security_code="1234"), today=TODAY), CardDetails)
    assert read_card(form(**amex, card_security_code="123"), today=TODAY) == {
        "card_security_code": CardProblem.SECURITY_CODE_INVALID
    }


def test_an_expiry_may_be_typed_without_its_slash_or_with_four_digits_of_year() -> None:
    for typed in ("1230", "12 / 30", "12/2030", "1/30"):
        card = read_card(form(card_expiry=typed), today=TODAY)
        assert isinstance(card, CardDetails), typed
        assert card.expiry_year == 2030


def test_a_card_is_valid_through_the_last_day_of_its_month() -> None:
    assert isinstance(read_card(form(card_expiry="12/26"), today=TODAY), CardDetails)
    assert isinstance(read_card(form(card_expiry="12/2026"), today=date(2026, 12, 31)), CardDetails)
    assert read_card(form(card_expiry="12/26"), today=date(2027, 1, 1)) == {
        "card_expiry": CardProblem.EXPIRY_PAST
    }


def test_an_expiry_twenty_years_ahead_is_taken_and_more_is_told_too_far() -> None:
    assert isinstance(read_card(form(card_expiry="12/2046"), today=TODAY), CardDetails)
    assert read_card(form(card_expiry="01/2047"), today=TODAY) == {
        "card_expiry": CardProblem.EXPIRY_TOO_FAR
    }
    assert "20 anos" in PT["expiry_too_far"] and "20 years" in EN["expiry_too_far"]


def test_the_page_carries_the_servers_own_brand_table_for_its_script() -> None:
    # The script once had a table of its own that named 506779 Elo; the server does not.
    table = json.loads(brand_table())
    assert table == [
        [brand.value, [list(span) for span in ranges], 4 if brand is CardBrand.AMEX else 3]
        for brand, ranges in BRAND_RANGES
    ]
    assert card_brand("5067790000000000") is None
    assert card_brand("5067780000000000") is CardBrand.ELO
