"""Pix keys as the Banco Central's key directory (DICT) holds them: each kind in its one form,
and what the directory cannot hold refused (issue 36: a%b@example.com, user@-example.com and a
landline were accepted)."""

from __future__ import annotations

import string
import uuid

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
)
from tucano.brazil.pix_keys import parse_pix_key, sandbox_pix_key

AREA_CODES = [
    11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 22, 24, 27, 28, 31, 32, 33, 34, 35, 37, 38,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 51, 53, 54, 55, 61, 62, 63, 64, 65, 66, 67, 68, 69,
    71, 73, 74, 75, 77, 79, 81, 82, 83, 84, 85, 86, 87, 88, 89, 91, 92, 93, 94, 95, 96, 97,
    98, 99,
]  # fmt: skip

# Repeated digits (00000000000) have right check digits and are no document.
cpfs = (
    st.text(string.digits, min_size=9, max_size=9)
    .map(lambda body: body + cpf_check_digits(body))
    .filter(is_valid_cpf)
)
cnpjs = (
    st.text(string.digits + string.ascii_uppercase, min_size=12, max_size=12)
    .map(lambda body: body + cnpj_check_digits(body))
    .filter(is_valid_cnpj)
)
mobiles = st.builds(
    lambda area, rest: f"+55{area}9{rest}",
    st.sampled_from(AREA_CODES),
    st.text(string.digits, min_size=8, max_size=8),
)
LOCAL = string.ascii_letters + string.digits + "_+-"
LABEL = string.ascii_letters + string.digits
emails = st.builds(
    lambda local, more, labels, tld: f"{local}{more}@{'.'.join(labels)}.{tld}",
    st.text(LOCAL, min_size=1, max_size=20),
    st.sampled_from(["", ".x", ".nome_2"]),
    st.lists(
        st.builds(
            lambda head, middle, tail: head + middle + tail,
            st.text(LABEL, min_size=1, max_size=1),
            st.text(LABEL + "-", max_size=10),
            st.text(LABEL, max_size=1),
        ).filter(lambda label: not label.endswith("-")),
        min_size=1,
        max_size=3,
    ),
    st.text(string.ascii_letters, min_size=2, max_size=6),
).filter(lambda email: len(email) <= 77)


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("529.982.247-25", "52998224725"),
        ("11.222.333/0001-81", "11222333000181"),
        ("12.ABC.345/01DE-35", "12ABC34501DE35"),
        ("+55 (11) 98765-4321", "+5511987654321"),
        ("Loja@Exemplo.com.br", "loja@exemplo.com.br"),
        ("o_k+tag-1@sub-d.example.org", "o_k+tag-1@sub-d.example.org"),
        ("123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
    ],
)
def test_a_pix_key_of_each_kind_is_kept_in_its_one_form(typed: str, stored: str) -> None:
    assert parse_pix_key(typed) == stored


@pytest.mark.parametrize(
    "key",
    [
        "",
        "529.982.247-24",  # wrong check digits
        "11222333000182",
        "\u0665\u0662\u0669\u0669\u0668\u0662\u0662\u0664\u0667\u0662\u0665",  # Arabic-Indic
        "+1 212 555 0100",  # not Brazilian
        "+55 11 1234",
        "+551133334444",  # a landline
        "+55 11 8765-4321",  # eight digits: a landline's length
        "+5511887654321",  # nine digits not starting with 9
        "+5520987654321",  # no such area code
        "+5510987654321",
        "not a key",
        "a" * 70 + "@example.com",  # longer than 77
        "loja@",
        "a%b@example.com",
        "user@-example.com",
        "user@example-.com",
        "user@example",  # no top-level domain
        "user@example.c0m",
        "user@exa_mple.com",
        ".user@example.com",
        "user.@example.com",
        "us..er@example.com",
        "us er@example.com",
        '"quoted"@example.com',
        "user@@example.com",
        "jos\u00e9@example.com",  # a letter outside ASCII
        "user@ex\u00e1mple.com",
        "user@example.com\u200b",
    ],
)
def test_what_the_key_directory_cannot_hold_is_not_a_pix_key(key: str) -> None:
    with pytest.raises(ValueError, match="Pix key"):
        parse_pix_key(key)


@given(cpfs)
def test_every_cpf_is_a_key_however_punctuated(cpf: str) -> None:
    assert parse_pix_key(cpf) == parse_pix_key(format_cpf(cpf)) == cpf


@given(cnpjs)
def test_every_cnpj_is_a_key_however_punctuated(cnpj: str) -> None:
    assert parse_pix_key(cnpj) == parse_pix_key(format_cnpj(cnpj)) == cnpj


@given(mobiles)
def test_every_mobile_number_is_a_key_and_no_landline_is(mobile: str) -> None:
    assert parse_pix_key(mobile) == mobile
    area, number = mobile[3:5], mobile[6:]
    assert parse_pix_key(f"+55 ({area}) 9{number[:4]}-{number[4:]}") == mobile
    for landline in (f"+55{area}{number}", f"+55{area}{number[:-1]}"):  # 8 digits, 9 digits
        with pytest.raises(ValueError, match="mobile number"):
            parse_pix_key(landline)


@given(emails)
def test_every_plain_address_is_a_key_in_lower_case(email: str) -> None:
    assert parse_pix_key(email) == email.lower()


@given(emails, st.sampled_from("%!#$&'*/=?^`{|}~\"(),:;<>[]\\ "))
def test_an_address_with_any_other_character_is_not_a_key(email: str, other: str) -> None:
    local, domain = email.split("@")
    with pytest.raises(ValueError, match="e-mail address"):
        parse_pix_key(f"{local}{other}x@{domain}")


@given(st.uuids())
def test_every_random_key_is_kept_in_lower_case_whatever_case_it_is_typed_in(
    key: uuid.UUID,
) -> None:
    assert parse_pix_key(str(key).upper()) == parse_pix_key(str(key)) == str(key)


def test_the_sandbox_key_is_a_random_key_fixed_per_customer() -> None:
    assert sandbox_pix_key(7) == sandbox_pix_key(7) != sandbox_pix_key(8)
    assert parse_pix_key(sandbox_pix_key(7)) == sandbox_pix_key(7)
