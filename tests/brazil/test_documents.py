"""CPF and CNPJ: known numbers, error messages, and what mod-11 check digits do and don't catch."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.brazil.documents import (
    cnpj_check_digits,
    cpf_check_digits,
    format_cnpj,
    format_cpf,
    is_valid_cnpj,
    is_valid_cpf,
    normalize_document,
    parse_registration_number,
    random_cnpj,
    random_cpf,
)

CNPJ_BODY_ALPHABET = string.digits + string.ascii_uppercase

VALID_CPFS = ["52998224725", "11144477735", "12345678909", "00000000191"]
VALID_NUMERIC_CNPJS = ["11222333000181", "11444777000161", "00000000000191"]
# The example in Receita Federal's note on the alphanumeric CNPJ.
VALID_ALPHANUMERIC_CNPJS = ["12ABC34501DE35"]

# A seeded Random rather than st.randoms(): the generators draw many times, and st.randoms() would
# make Hypothesis record every draw.
rngs = st.integers(min_value=0, max_value=2**64).map(random.Random)
cpfs = (
    st.text(string.digits, min_size=9, max_size=9)
    .map(lambda body: body + cpf_check_digits(body))
    .filter(is_valid_cpf)
)
cnpjs = (
    st.text(CNPJ_BODY_ALPHABET, min_size=12, max_size=12)
    .map(lambda body: body + cnpj_check_digits(body))
    .filter(is_valid_cnpj)
)


def test_normalize_strips_typed_punctuation_and_upper_cases() -> None:
    assert normalize_document(" 529.982.247-25 ") == "52998224725"
    assert normalize_document("12.abc.345/01de-35") == "12ABC34501DE35"
    assert normalize_document("11 222 333 0001 81") == "11222333000181"
    assert normalize_document("") == ""


SEPARATORS = ".-/ "
ALLOWED = string.ascii_letters + string.digits + SEPARATORS
CHARACTERS_REFUSED = (
    "must be written in ASCII digits and letters, with only dots, dashes, slashes or spaces "
    "between them"
)


@pytest.mark.parametrize(
    "text",
    [
        "529\n982\t247\u200325",  # a line break, a tab, an em space
        "529\x1c98224725",  # a control character (the file separator)
        "RN3QNL\u00dfNOPY55",  # ß, which upper-cases to SS
        "\uff15\uff12\uff19.982.247-25",  # fullwidth digits
        "529\u00a0982\u00a0247\u00a025",  # no-break spaces
        "52998224725\x00",
        "11.222.333/0001-8\u0661",  # an Arabic-Indic digit
        "12.\u0430bc.345/01de-35",  # a Cyrillic a
        "529_982_247_25",
    ],
)
def test_characters_outside_ascii_letters_digits_and_separators_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=CHARACTERS_REFUSED):
        normalize_document(text)
    with pytest.raises(ValueError, match=CHARACTERS_REFUSED):
        parse_registration_number(text)


@given(text=st.text(ALLOWED))
def test_normalizing_allowed_text_keeps_its_letters_and_digits_upper_cased(text: str) -> None:
    normalized = normalize_document(text)
    assert normalized == "".join(c for c in text if c not in SEPARATORS).upper()
    assert set(normalized) <= set(CNPJ_BODY_ALPHABET)
    assert normalize_document(normalized) == normalized


@given(
    before=st.text(ALLOWED),
    odd=st.characters(codec="utf-8").filter(lambda c: c not in ALLOWED),
    after=st.text(ALLOWED),
)
def test_any_other_character_anywhere_is_refused(before: str, odd: str, after: str) -> None:
    with pytest.raises(ValueError, match=CHARACTERS_REFUSED):
        normalize_document(before + odd + after)


@given(cpf=cpfs, cuts=st.lists(st.tuples(st.integers(0, 11), st.sampled_from(SEPARATORS))))
def test_separators_anywhere_in_a_cpf_leave_it_as_it_was(
    cpf: str, cuts: list[tuple[int, str]]
) -> None:
    typed = cpf
    for position, separator in cuts:
        typed = typed[:position] + separator + typed[position:]
    assert parse_registration_number(typed) == cpf


@pytest.mark.parametrize("cpf", VALID_CPFS)
def test_known_cpfs_are_valid(cpf: str) -> None:
    assert is_valid_cpf(cpf)
    assert parse_registration_number(cpf) == cpf
    assert parse_registration_number(format_cpf(cpf)) == cpf


def test_cpf_with_punctuation_parses_to_digits() -> None:
    assert parse_registration_number("529.982.247-25") == "52998224725"
    assert format_cpf("52998224725") == "529.982.247-25"


@pytest.mark.parametrize(
    "cpf",
    [
        "52998224726",  # second check digit wrong
        "52998224715",  # first check digit wrong
        "12345678900",
        "5299822472",  # 10 digits
        "529982247250",  # 12 digits
        "5299822472A",  # a letter
        "529.982.247-25",  # validators take the normalised form
        "",
        "٥٢٩٩٨٢٢٤٧٢٥",  # Arabic-Indic digits are digits to str.isdigit, not to a CPF
    ],
)
def test_malformed_or_mistyped_cpfs_are_invalid(cpf: str) -> None:
    assert not is_valid_cpf(cpf)


@pytest.mark.parametrize("digit", string.digits)
def test_repeated_digit_cpfs_are_refused_though_their_check_digits_work(digit: str) -> None:
    cpf = digit * 11
    assert cpf_check_digits(cpf[:9]) == cpf[9:]
    assert not is_valid_cpf(cpf)
    with pytest.raises(ValueError, match="all digits are the same"):
        parse_registration_number(cpf)


@pytest.mark.parametrize("cnpj", VALID_NUMERIC_CNPJS + VALID_ALPHANUMERIC_CNPJS)
def test_known_cnpjs_are_valid(cnpj: str) -> None:
    assert is_valid_cnpj(cnpj)
    assert parse_registration_number(cnpj) == cnpj
    assert parse_registration_number(format_cnpj(cnpj)) == cnpj


def test_alphanumeric_cnpj_in_display_form_and_lower_case_parses() -> None:
    assert parse_registration_number("12.ABC.345/01DE-35") == "12ABC34501DE35"
    assert parse_registration_number("12.abc.345/01de-35") == "12ABC34501DE35"
    assert format_cnpj("12abc34501de35") == "12.ABC.345/01DE-35"
    assert format_cnpj("11222333000181") == "11.222.333/0001-81"


def test_letters_are_worth_their_ascii_code_minus_48() -> None:
    # 'A' = 17 ... 'Z' = 42, so a numeric CNPJ keeps the check digits it always had.
    assert cnpj_check_digits("12ABC34501DE") == "35"
    assert cnpj_check_digits("112223330001") == "81"


@pytest.mark.parametrize(
    "cnpj",
    [
        "11222333000182",  # second check digit wrong
        "11222333000171",  # first check digit wrong
        "12ABC34501DE36",
        "12ABC34501DE3A",  # a letter among the check digits
        "12ABC34501D35",  # 13 characters
        "12ABC34501DE350",  # 15 characters
        "12abc34501de35",  # validators take the normalised (upper-case) form
        "12ABC34501D*35",  # not a digit nor A-Z
        "12ÀBC34501DE35",  # not ASCII
        "12.ABC.345/01DE-35",
    ],
)
def test_malformed_or_mistyped_cnpjs_are_invalid(cnpj: str) -> None:
    assert not is_valid_cnpj(cnpj)


def test_all_zero_cnpj_is_refused() -> None:
    assert cnpj_check_digits("0" * 12) == "00"
    assert not is_valid_cnpj("0" * 14)


@pytest.mark.parametrize("digit", string.digits)
def test_no_all_same_cnpj_is_valid(digit: str) -> None:
    assert not is_valid_cnpj(digit * 14)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "must be a valid CPF (11 digits) or CNPJ (14 characters)"),
        ("1234567890", "must be a valid CPF (11 digits) or CNPJ (14 characters)"),
        ("123.456.789-091", "must be a valid CPF (11 digits) or CNPJ (14 characters)"),
        ("529.982.247-26", "is not a valid CPF: check digits do not match"),
        ("5299822472A", "is not a valid CPF: a CPF is 11 digits"),
        ("11.222.333/0001-82", "is not a valid CNPJ: check digits do not match"),
        ("12.ABC.345/01DE-3A", "is not a valid CNPJ: the last 2 characters must be digits"),
        # A character no document is written in is refused before the CNPJ is read.
        ("12.AB*.345/01DE-35", CHARACTERS_REFUSED),
        ("00.000.000/0000-00", "is not a valid CNPJ: all characters are the same"),
    ],
)
def test_parse_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_registration_number(text)


def test_format_refuses_invalid_documents() -> None:
    with pytest.raises(ValueError, match="check digits"):
        format_cpf("52998224726")
    with pytest.raises(ValueError, match="check digits"):
        format_cnpj("11222333000182")


def test_generators_are_deterministic_for_a_seed() -> None:
    assert random_cpf(random.Random(7)) == random_cpf(random.Random(7))
    assert random_cnpj(random.Random(7), alphanumeric=True) == random_cnpj(
        random.Random(7), alphanumeric=True
    )


@given(rng=rngs)
def test_every_generated_cpf_is_valid(rng: random.Random) -> None:
    cpf = random_cpf(rng)
    assert len(cpf) == 11
    assert is_valid_cpf(cpf)
    assert parse_registration_number(format_cpf(cpf)) == cpf


@given(rng=rngs, alphanumeric=st.booleans())
def test_every_generated_cnpj_is_valid(rng: random.Random, alphanumeric: bool) -> None:
    cnpj = random_cnpj(rng, alphanumeric=alphanumeric)
    assert len(cnpj) == 14
    assert is_valid_cnpj(cnpj)
    assert parse_registration_number(format_cnpj(cnpj)) == cnpj
    if not alphanumeric:
        assert cnpj.isdigit()


def _replace(value: str, position: int, character: str) -> str:
    return value[:position] + character + value[position + 1 :]


@given(cpf=cpfs, position=st.sampled_from([9, 10]), digit=st.sampled_from(string.digits))
def test_any_change_to_a_cpf_check_digit_is_caught(cpf: str, position: int, digit: str) -> None:
    if digit != cpf[position]:
        assert not is_valid_cpf(_replace(cpf, position, digit))


@given(cnpj=cnpjs, position=st.sampled_from([12, 13]), digit=st.sampled_from(string.digits))
def test_any_change_to_a_cnpj_check_digit_is_caught(cnpj: str, position: int, digit: str) -> None:
    if digit != cnpj[position]:
        assert not is_valid_cnpj(_replace(cnpj, position, digit))


# A single-digit change in the body always changes the mod-11 remainders (the weights and the
# change are both non-zero mod 11), but "remainder 0 or 1 gives 0" maps two remainders to one check
# digit. So a body change can slip through only when that collapse hides it in both check digits:
# both are 0. Position 0 of a CPF weighs 11 = 0 mod 11 in the second sum, so there only the first
# check digit need be 0. (By brute force: about 2 in 1000 CPF and 4 in 10000 numeric CNPJ
# single-digit substitutions go unnoticed.)


@given(cpf=cpfs, position=st.integers(0, 8), digit=st.sampled_from(string.digits))
def test_a_cpf_body_change_is_caught_unless_the_check_digits_are_zero(
    cpf: str, position: int, digit: str
) -> None:
    if digit != cpf[position] and is_valid_cpf(_replace(cpf, position, digit)):
        assert cpf[9] == "0"
        assert cpf[10] == "0" or position == 0


def test_the_cpf_blind_spot_exists() -> None:
    # Each change moves a remainder between 0 and 1, and both give check digit 0.
    assert is_valid_cpf("28698692400")
    assert is_valid_cpf("38698692400")  # first digit
    assert is_valid_cpf("28698892400")  # sixth digit


@given(cnpj=cnpjs, position=st.integers(0, 11), character=st.sampled_from(CNPJ_BODY_ALPHABET))
def test_a_cnpj_body_change_is_caught_unless_mod_11_cannot_see_it(
    cnpj: str, position: int, character: str
) -> None:
    if character == cnpj[position]:
        return
    changed = _replace(cnpj, position, character)
    if (ord(character) - ord(cnpj[position])) % 11 == 0:
        # Values 0..42 can differ by 11, 22 or 33 ('0' and 'B', '7' and 'I'): the sums do not
        # change at all, so no mod-11 check digit can catch it. Only letters make this possible;
        # it is about 7 in 100 of the substitutions of one alphanumeric character by another.
        assert is_valid_cnpj(changed) or len(set(changed)) == 1
    elif is_valid_cnpj(changed):
        assert cnpj[12:] == "00"


def test_the_alphanumeric_cnpj_blind_spot_exists() -> None:
    # 'B' (18) and '7' (7) differ by 11: both versions of the example are valid.
    assert is_valid_cnpj("12ABC34501DE35")
    assert is_valid_cnpj("12A7C34501DE35")
