"""Merchant profiles: what the operator may set, and what the checkout shows without one."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tucano.brazil.pix_keys import parse_pix_key, sandbox_pix_key
from tucano.customers.schemas import MerchantProfileInput
from tucano.customers.service import merchant_of


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("529.982.247-25", "52998224725"),
        ("11.222.333/0001-81", "11222333000181"),
        ("+55 (11) 98765-4321", "+5511987654321"),
        ("Loja@Exemplo.com.br", "loja@exemplo.com.br"),
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
        "+1 212 555 0100",  # not Brazilian
        "+55 11 1234",
        "not a key",
        "a" * 70 + "@example.com",  # longer than 77
        "loja@",
    ],
)
def test_anything_else_is_not_a_pix_key(key: str) -> None:
    with pytest.raises(ValueError, match="Pix key"):
        parse_pix_key(key)


def test_the_sandbox_key_is_a_random_key_fixed_per_customer() -> None:
    assert sandbox_pix_key(7) == sandbox_pix_key(7) != sandbox_pix_key(8)
    assert parse_pix_key(sandbox_pix_key(7)) == sandbox_pix_key(7)


def test_a_profile_keeps_the_name_as_given_and_refuses_what_a_br_code_cannot_carry() -> None:
    profile = MerchantProfileInput(merchant_name="  Padaria   São João ", merchant_city="Belém")
    assert profile.merchant_name == "Padaria São João" and profile.mcc is None
    for bad in (
        {"merchant_name": ""},
        {"merchant_name": "東京"},  # nothing left once accents and other scripts go
        {"merchant_name": "Loja\nFalsa"},
        {"merchant_name": "x" * 101},
        {"merchant_city": ""},
        {"mcc": "54111"},
        {"mcc": "abcd"},
        {"pix_key": "nope"},
    ):
        with pytest.raises(ValidationError):
            MerchantProfileInput(**({"merchant_name": "Loja", "merchant_city": "Rio"} | bad))


def test_without_a_profile_the_sandbox_shows_an_evidently_fake_merchant_and_production_none() -> (
    None
):
    fake = merchant_of(None, customer_id=42, sandbox=True)
    assert fake is not None and fake.sandbox_stand_in
    assert (fake.name, fake.city, fake.mcc) == ("TUCANO SANDBOX", "SAO PAULO", "0000")
    assert fake.pix_key == sandbox_pix_key(42)
    assert merchant_of(None, customer_id=42, sandbox=False) is None
