"""Payment card numbers in text: no payload carries one, and no answer repeats one.

A card number here is what the card networks issue: 14 to 19 digits whose Luhn check holds and
whose first digits and length go together (Diners 14, American Express 15, most networks 16,
Visa, Discover, JCB and UnionPay up to 19), written together or as cards print them (groups of
four, the last one shorter, or 4-6-5 and 4-6-4) with a space, dash or dot between groups. Tied
to the networks' prefixes, a date and time written as digits (20260115103000) is not taken for
one; nor is a phone number ("+55 11 98765-4325"), a CNPJ (its own check digits tell), a UUID or
an IBAN whose groups happen to line up as a card's.
"""

from __future__ import annotations

import re
import unicodedata

from tucano.brazil.documents import is_valid_cnpj

_NOT_CARDS = re.compile(
    r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b"  # UUID
    r"|\b[A-Z]{2}[0-9]{2}(?: ?[0-9A-Z]{4}){3,7}(?: ?[0-9A-Z]{1,4})?\b"  # IBAN
)
# Runs of digit groups: digits, and single separators between them.
_GROUPS = re.compile(r"[0-9]+(?:[ .-][0-9]+)*")
_SEPARATOR = re.compile(r"[ .-]")
# Groups of a printed card, from its first group: 4-4-4-x(-y), or 4-6-5 / 4-6-4.
_PRINTED = (
    (4, 4, 4, 4),
    (4, 4, 4, 3),
    (4, 4, 4, 2),
    (4, 4, 4, 4, 3),
    (4, 4, 4, 4, 2),
    (4, 4, 4, 4, 1),
    (4, 6, 5),
    (4, 6, 4),
)


def _issued(digits: str) -> bool:
    """Whether a card network issues numbers of this length starting this way."""
    length = len(digits)
    if length == 14:
        return digits.startswith(("300", "301", "302", "303", "304", "305", "36", "38", "39"))
    if length == 15:
        return digits.startswith(("34", "37"))
    if length == 16:
        return digits[0] in "3456" or (digits[0] == "2" and 2221 <= int(digits[:4]) <= 2720)
    if 17 <= length <= 19:
        return digits[0] in "456" or digits.startswith("35")
    return False


def _luhn(digits: str) -> bool:
    total = 0
    for position, digit in enumerate(reversed(digits)):
        doubled = int(digit) * (2 if position % 2 else 1)
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _is_card_number(digits: str) -> bool:
    # A CNPJ is 14 digits too, and some start as Diners cards do: its own check digits tell.
    return _issued(digits) and _luhn(digits) and not is_valid_cnpj(digits)


def holds_a_card_number(text: str) -> bool:
    """Whether `text` is, or has inside it, a payment card number. Every way a run of groups
    could hold one is tried (a card followed by its security code, or after a year), each in
    constant time: linear in the text."""
    text = unicodedata.normalize("NFKC", text)  # fullwidth digits, non-breaking spaces
    # A UUID's or an IBAN's groups can line up as a card's: neither is one.
    text = _NOT_CARDS.sub(" ", text)
    for run in _GROUPS.finditer(text):
        groups = _SEPARATOR.split(run.group())
        lengths = tuple(len(group) for group in groups)
        for start, length in enumerate(lengths):
            if 14 <= length <= 19 and _is_card_number(groups[start]):
                return True
            if length != 4:  # every printed shape starts with a group of four
                continue
            for shape in _PRINTED:
                if lengths[start : start + len(shape)] == shape and _is_card_number(
                    "".join(groups[start : start + len(shape)])
                ):
                    return True
    return False


def redact_card_numbers(key: str) -> str:
    """A key (or any value) as an answer may show it: never a card number, at most 40
    characters. Only its first 256 characters are read: longer, it is cut anyway."""
    cut = key if len(key) <= 40 else key[:37] + "..."
    if holds_a_card_number(key[:256]) or holds_a_card_number(cut):
        return "(a key holding a card number)"
    return cut
