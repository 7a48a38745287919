"""Card numbers in text, however they are written (decisions.md, "Text fields"): the invariant
over scripts, groupings and separators, and the numbers of Brazilian life that are no card."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tucano.brazil.documents import is_valid_cnpj
from tucano.core.card_numbers import holds_a_card_number

# The zero of some scripts whose ten digits follow each other (str.isdecimal holds for them).
ZEROS = [
    0x30,  # ASCII
    0x660,  # Arabic-Indic
    0x6F0,  # Extended Arabic-Indic (Persian, Urdu)
    0x966,  # Devanagari
    0x9E6,  # Bengali
    0xE50,  # Thai
    0xFF10,  # full-width
    0x1D7CE,  # mathematical bold
]
# Anything that is neither a letter nor a digit may stand between groups, alone or repeated.
SEPARATORS = [
    " ", "  ", "\u00a0", "\u2009", "-", ".", "/", ",", "|", "_", "*", "+", "·", "•", ":", "'",
    "\u2013", "\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\u202e", "\ufeff", "\u0301",
    "\u3164", "( ", ") ",
]  # fmt: skip
# Prefixes and lengths the networks issue (Visa, Mastercard, Amex, Diners, Discover, JCB, Elo).
ISSUED = [
    ("4", 13), ("4", 16), ("4", 19), ("51", 16), ("55", 16), ("2221", 16), ("2720", 16),
    ("34", 15), ("37", 15), ("36", 14), ("300", 14), ("6011", 16), ("65", 19), ("35", 17),
    ("636368", 16),
]  # fmt: skip


def luhn_completed(body: str) -> str:
    """`body` and the check digit that makes its Luhn sum a multiple of 10."""
    total = 0
    for position, digit in enumerate(reversed(body)):
        doubled = int(digit) * (1 if position % 2 else 2)
        total += doubled - 9 if doubled > 9 else doubled
    return body + str(-total % 10)


@st.composite
def card_numbers(draw: st.DrawFn) -> str:
    prefix, length = draw(st.sampled_from(ISSUED))
    rest = draw(st.text("0123456789", min_size=length - len(prefix) - 1, max_size=length - 1))
    number = luhn_completed(prefix + rest[: length - len(prefix) - 1])
    # A 14-digit number whose CNPJ check digits hold is read as the CNPJ it also is.
    assume(not is_valid_cnpj(number))
    return number


@st.composite
def written(draw: st.DrawFn, digits: str) -> str:
    """`digits` in one script, cut into groups, with separators between them."""
    zero = draw(st.sampled_from(ZEROS))
    text = "".join(chr(zero + int(d)) for d in digits)
    cuts = sorted(draw(st.sets(st.integers(1, len(text) - 1), max_size=len(text) - 1)))
    groups = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    out = groups[0]
    for group in groups[1:]:
        out += draw(st.sampled_from(SEPARATORS)) + group
    return out


@given(data=st.data(), card=card_numbers())
def test_a_card_number_is_found_however_it_is_written(data: st.DataObject, card: str) -> None:
    shown = data.draw(written(card))
    before = data.draw(st.sampled_from(["", "pago com ", "ref. ", "nº 12 - "]))
    after = data.draw(st.sampled_from(["", " obrigado", " cvv 123", ", em 3x"]))
    assert holds_a_card_number(before + shown + after)


@pytest.mark.parametrize(
    "text",
    [
        "4111\u200b1111\u200b1111\u200b1111",
        "4111/1111/1111/1111",
        "4111,1111,1111,1111",
        "4111|1111|1111|1111",
        "4111  1111  1111  1111",
        "\u0664\u0661\u0661\u0661" + "\u0661" * 12,  # Arabic-Indic digits
        "BR12 4111 1111 1111 1111",  # shaped as an IBAN, whose check digits do not hold
    ],
)
def test_the_ways_an_outside_test_hid_a_card_are_found(text: str) -> None:
    assert holds_a_card_number(f"Maria {text} Silva")


@pytest.mark.parametrize(
    "text",
    [
        "+55 11 98765-4325",  # a phone number (its 13 digits pass the Luhn check)
        "CPF 529.982.247-25, fone +55 11 98765-4325",
        "63.383.683/0001-23",  # a CNPJ (its 14 digits pass the Luhn check)
        "07c45cfb-5536-4934-8462-1452e39a3595",  # a UUID whose middle groups pass the check
        "BR51 6070 1190 3148 2425 5465 8461 C",  # an IBAN, the same
        "2026-01-15 10:30:00",
        "E12345678202601151030abcdefghijk",  # twenty digits in a row inside an id
        "Pedido 42, 3 itens, R$ 1.234,56",
        "",
    ],
)
def test_numbers_of_everyday_text_are_no_card(text: str) -> None:
    assert not holds_a_card_number(text)


def test_a_long_run_of_digit_groups_is_read_in_linear_time() -> None:
    # Each window is at most 19 digits and its Luhn sum one subtraction: a quadratic scan of
    # these 200,000 characters would take minutes, this one a fraction of a second.
    assert not holds_a_card_number("1 " * 100_000)
