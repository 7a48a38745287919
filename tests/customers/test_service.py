"""Merchant profiles: what the operator may set, and what the checkout shows without one."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tucano.brazil.pix_keys import sandbox_pix_key
from tucano.customers.schemas import MerchantProfileInput
from tucano.customers.service import merchant_of


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
        {"pix_key": "a%b@example.com"},
        {"pix_key": "+551133334444"},  # a landline
        # What would hide or fake the name a payer reads (issue 36).
        {"merchant_name": "Loja\u202eanuaP"},  # a right-to-left override
        {"merchant_name": "Loja\u200b"},
        {"merchant_city": "\u2066Rio\u2069"},
        {"merchant_name": "Loja 4111/1111/1111/1111"},
        {"merchant_city": "\u0301\u0301"},
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
