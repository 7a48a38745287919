"""Payment cards as the checkout form reads them, as pure functions: the brand from the number,
the Luhn check, lengths by brand, the expiry. A card's number and security code live only in a
`CardDetails` on its way to the processor: its repr shows the brand and last four digits."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from enum import StrEnum


class CardBrand(StrEnum):
    VISA = "Visa"
    MASTERCARD = "Mastercard"
    ELO = "Elo"
    AMEX = "American Express"
    HIPERCARD = "Hipercard"
    DINERS = "Diners Club"
    DISCOVER = "Discover"
    JCB = "JCB"


# Issuer ranges of the first six digits, most specific first: Elo and Hipercard issue inside
# ranges that would otherwise read as Visa, Discover or Diners. The form's script names the
# brand by this same table, which the page carries (page.brand_table).
_ELO = (
    (401178, 401179), (431274, 431274), (438935, 438935), (451416, 451416), (457393, 457393),
    (457631, 457632), (504175, 504175), (506699, 506778), (509000, 509999), (627780, 627780),
    (636297, 636297), (636368, 636368), (650031, 650033), (650035, 650051), (650405, 650439),
    (650485, 650538), (650541, 650598), (650700, 650718), (650720, 650727), (650901, 650978),
    (651652, 651679), (655000, 655019), (655021, 655058),
)  # fmt: skip
_HIPERCARD = (
    (384100, 384100), (384140, 384140), (384160, 384160), (606282, 606282), (637095, 637095),
    (637568, 637568), (637599, 637599), (637609, 637609), (637612, 637612),
)  # fmt: skip
BRAND_RANGES: tuple[tuple[CardBrand, tuple[tuple[int, int], ...]], ...] = (
    (CardBrand.ELO, _ELO),
    (CardBrand.HIPERCARD, _HIPERCARD),
    (CardBrand.AMEX, ((340000, 349999), (370000, 379999))),
    (CardBrand.DINERS, ((300000, 305999), (360000, 369999), (380000, 399999))),
    (CardBrand.JCB, ((352800, 358999),)),
    (CardBrand.DISCOVER, ((601100, 601199), (644000, 659999))),
    (CardBrand.MASTERCARD, ((510000, 559999), (222100, 272099))),
    (CardBrand.VISA, ((400000, 499999),)),
)
LENGTHS: Mapping[CardBrand, tuple[int, ...]] = {
    CardBrand.VISA: (13, 16, 19),
    CardBrand.MASTERCARD: (16,),
    CardBrand.ELO: (16,),
    CardBrand.AMEX: (15,),
    CardBrand.HIPERCARD: (13, 16, 19),
    CardBrand.DINERS: (14, 15, 16, 17, 18, 19),
    CardBrand.DISCOVER: (16, 17, 18, 19),
    CardBrand.JCB: (16, 17, 18, 19),
}
ANY_LENGTH = tuple(range(13, 20))  # a number no brand above claims: the processor decides


def card_brand(digits: str) -> CardBrand | None:
    """The brand that issues numbers starting like `digits` (6 digits suffice), if known."""
    if len(digits) < 6 or not digits[:6].isdigit():
        return None
    prefix = int(digits[:6])
    for brand, ranges in BRAND_RANGES:
        if any(low <= prefix <= high for low, high in ranges):
            return brand
    return None


def passes_luhn(digits: str) -> bool:
    """The mod-10 check every card number carries in its last digit."""
    if not digits.isdigit():
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def security_code_lengths(brand: CardBrand | None) -> tuple[int, ...]:
    """American Express prints 4 digits on the front; the others 3 on the back."""
    if brand is CardBrand.AMEX:
        return (4,)
    return (3,) if brand is not None else (3, 4)


@dataclass(frozen=True, repr=False)
class CardDetails:
    number: str
    holder_name: str
    expiry_month: int
    expiry_year: int  # four digits
    security_code: str
    brand: CardBrand | None

    @property
    def last4(self) -> str:
        return self.number[-4:]

    @property
    def brand_name(self) -> str:
        return self.brand.value if self.brand is not None else "Cartão"

    def __repr__(self) -> str:
        return f"CardDetails({self.brand_name} ending {self.last4})"


class CardProblem(StrEnum):
    """What is wrong with a field of the card form (the page words each one)."""

    NUMBER_MISSING = "number_missing"
    NUMBER_INVALID = "number_invalid"
    HOLDER_MISSING = "holder_missing"
    HOLDER_INVALID = "holder_invalid"
    EXPIRY_INVALID = "expiry_invalid"
    EXPIRY_PAST = "expiry_past"
    EXPIRY_TOO_FAR = "expiry_too_far"
    SECURITY_CODE_INVALID = "security_code_invalid"


CARD_FIELDS = ("card_number", "card_holder", "card_expiry", "card_security_code")
_SEPARATORS = re.compile(r"[\s\-.]")
_EXPIRY = re.compile(r"(?P<month>[0-9]{1,2})\s*/?\s*(?P<year>[0-9]{2}|[0-9]{4})")
# Letters of any alphabet, spaces and the marks names carry; no digits (a number typed there
# would be a card number kept where no one masks it).
_HOLDER = re.compile(r"[^\W\d_]+(?:[ '.\-][^\W\d_]*)*")
_LONGEST_VALIDITY_YEARS = 20


def read_card(form: Mapping[str, str], *, today: date) -> CardDetails | dict[str, CardProblem]:
    """The card of a submitted form, or each field's problem (keyed by the field's name).
    `today` is Brasília's day: a card is valid through the last day of its month there."""
    problems: dict[str, CardProblem] = {}
    number = _SEPARATORS.sub("", form.get("card_number", ""))
    brand = card_brand(number)
    if not number:
        problems["card_number"] = CardProblem.NUMBER_MISSING
    elif (
        not number.isascii()
        or not passes_luhn(number)
        or len(number) not in (LENGTHS[brand] if brand else ANY_LENGTH)
    ):
        problems["card_number"] = CardProblem.NUMBER_INVALID
    holder = " ".join(form.get("card_holder", "").split())
    if not holder:
        problems["card_holder"] = CardProblem.HOLDER_MISSING
    elif len(holder) < 2 or len(holder) > 50 or not _HOLDER.fullmatch(holder):
        problems["card_holder"] = CardProblem.HOLDER_INVALID
    month = year = 0
    expiry = _EXPIRY.fullmatch(form.get("card_expiry", "").strip())
    if expiry is None or not expiry["month"].isascii() or not expiry["year"].isascii():
        problems["card_expiry"] = CardProblem.EXPIRY_INVALID
    else:
        month, year = int(expiry["month"]), int(expiry["year"])
        year += 2000 if year < 100 else 0
        if not 1 <= month <= 12:
            problems["card_expiry"] = CardProblem.EXPIRY_INVALID
        elif year > today.year + _LONGEST_VALIDITY_YEARS:
            problems["card_expiry"] = CardProblem.EXPIRY_TOO_FAR
        elif (year, month) < (today.year, today.month):  # valid through its month's last day
            problems["card_expiry"] = CardProblem.EXPIRY_PAST
    code = form.get("card_security_code", "").strip()
    if not (code.isascii() and code.isdigit() and len(code) in security_code_lengths(brand)):
        problems["card_security_code"] = CardProblem.SECURITY_CODE_INVALID
    if problems:
        return problems
    return CardDetails(number, holder, month, year, code, brand)
