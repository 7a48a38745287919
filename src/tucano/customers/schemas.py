"""The merchant profile as the operator gives it, checked once for the page and the BR Code."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from tucano.brazil.brcode import MERCHANT_CITY_MAX, MERCHANT_NAME_MAX, br_code_text
from tucano.brazil.pix_keys import parse_pix_key
from tucano.core.card_numbers import holds_a_card_number
from tucano.core.plain_text import BLANK, FORMAT_CHARACTERS, has_format_characters, shows_nothing

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _single_line_text(value: str) -> str:
    """One line a payer reads on the checkout: nothing that hides or fakes what it shows."""
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters (a line break, a tab)")
    if holds_a_card_number(value):
        raise ValueError("has a card number, which a checkout must not show")
    if has_format_characters(value):
        raise ValueError(FORMAT_CHARACTERS)
    if value.strip() and shows_nothing(value):
        raise ValueError(BLANK)
    return " ".join(value.split())


def _written_in_the_br_code(limit: int) -> AfterValidator:
    def check(value: str) -> str:
        if not br_code_text(value, limit):
            raise ValueError("must have letters or digits a BR Code can carry (A-Z, 0-9)")
        return value

    return AfterValidator(check)


def _mcc(value: str) -> str:
    if not re.fullmatch(r"[0-9]{4}", value):
        raise ValueError("must be 4 digits (a merchant category code such as 5411)")
    return value


MerchantName = Annotated[
    str,
    AfterValidator(_single_line_text),
    Field(min_length=1, max_length=100),
    _written_in_the_br_code(MERCHANT_NAME_MAX),
]
MerchantCity = Annotated[
    str,
    AfterValidator(_single_line_text),
    Field(min_length=1, max_length=60),
    _written_in_the_br_code(MERCHANT_CITY_MAX),
]
PixKey = Annotated[str, AfterValidator(parse_pix_key)]
Mcc = Annotated[str, AfterValidator(_mcc)]


class MerchantProfileInput(BaseModel):
    """`tucano customers set`'s options. The page shows name and city as given; the BR Code
    carries them without accents, cut to 25 and 15 characters."""

    model_config = ConfigDict(extra="forbid")

    merchant_name: MerchantName
    merchant_city: MerchantCity
    pix_key: PixKey | None = None
    mcc: Mcc | None = None
