"""Payment card numbers in text: no payload carries one, and no answer repeats one.

A card number here is what the card networks issue: 13 to 19 digits whose Luhn check holds and
whose first digits and length go together (Visa 13, Diners 14, American Express 15, most
networks 16, Visa, Discover, JCB and UnionPay up to 19). It is found however it is written:
digits of any script (Arabic-Indic, Devanagari, full-width...), in groups of any size, separated
by anything that is neither a letter nor a digit (spaces, punctuation such as `/`, `,` or `|`,
zero-width and other invisible characters), one or many at a time. Tied to the networks'
prefixes, a date and time written as digits (20260115103000) is not taken for one; nor is a
phone number ("+55 11 98765-4325"), a CNPJ (its own check digits tell), a UUID or an IBAN
(its own check digits tell) whose groups happen to line up as a card's.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from array import array

from tucano.brazil.documents import is_valid_cnpj
from tucano.core.plain_text import FILLERS

_UUID = re.compile(
    r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b"
)
_IBAN = re.compile(r"\b[A-Z]{2}[0-9]{2}(?: ?[0-9A-Z]{4}){3,7}(?: ?[0-9A-Z]{1,4})?\b")
# Between two groups of digits: anything but a letter or a digit (`\W` and `_`), and the
# letters that draw nothing.
_BETWEEN = r"[\W_" + "".join(FILLERS) + "]+"
# Runs of digit groups (`\d` is a decimal digit of any script), and the groups of one run.
_RUNS = re.compile(r"\d+(?:" + _BETWEEN + r"\d+)*")
_GROUPS = re.compile(r"\d+")
_SHORTEST = 13
_LONGEST = 19


def _issued(digits: str) -> bool:
    """Whether a card network issues numbers of this length starting this way."""
    length = len(digits)
    if length == 13:
        return digits[0] == "4"
    if length == 14:
        return digits.startswith(("300", "301", "302", "303", "304", "305", "36", "38", "39"))
    if length == 15:
        return digits.startswith(("34", "37"))
    if length == 16:
        return digits[0] in "3456" or (digits[0] == "2" and 2221 <= int(digits[:4]) <= 2720)
    if 17 <= length <= _LONGEST:
        return digits[0] in "456" or digits.startswith("35")
    return False


# Each digit's value, and its share of the Luhn sum when doubled, by byte.
_VALUE = bytes.maketrans(b"0123456789", bytes(range(10)))
_DOUBLED = bytes.maketrans(b"0123456789", bytes((0, 2, 4, 6, 8, 1, 3, 5, 7, 9)))


def _luhn_sums(digits: str) -> tuple[array[int], array[int]]:
    """Running sums from which the Luhn sum of any `digits[begin:end]` is one subtraction: the
    first for an odd `end` (digits at even places kept, at odd places doubled), the second for
    an even one."""
    written = digits.encode("ascii")
    kept, doubled = written.translate(_VALUE), written.translate(_DOUBLED)
    for_odd_end, for_even_end = bytearray(kept), bytearray(doubled)
    for_odd_end[1::2], for_even_end[1::2] = doubled[1::2], kept[1::2]
    return (
        array("q", itertools.accumulate(for_odd_end, initial=0)),
        array("q", itertools.accumulate(for_even_end, initial=0)),
    )


def _is_card_number(luhn_checked: str) -> bool:
    # A CNPJ is 14 digits too, and some start as Diners cards do: its own check digits tell.
    return _issued(luhn_checked) and not is_valid_cnpj(luhn_checked)


def _is_iban(text: str) -> bool:
    """Whether an IBAN-shaped text's check digits hold (ISO 13616, mod 97)."""
    compact = text.replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _set_aside(match: re.Match[str]) -> str:
    return " " if _is_iban(match.group()) else match.group()


def _ascii_digits(group: str) -> str:
    return "".join(str(unicodedata.decimal(c)) for c in group)


def holds_a_card_number(text: str) -> bool:
    """Whether `text` is, or has inside it, a payment card number: whole groups of a run, next
    to each other, whose digits make one (a card followed by its security code, or after a
    year, is found). Linear in the text: each group ends at most seven windows of 13 to 19
    digits, and each window's Luhn sum is one subtraction."""
    text = unicodedata.normalize("NFKC", text)  # superscript and circled digits, ligatures
    # A UUID's or an IBAN's groups can line up as a card's: neither is one.
    text = _IBAN.sub(_set_aside, _UUID.sub(" ", text))
    for run in _RUNS.finditer(text):
        groups = _GROUPS.findall(run.group())
        digits = "".join(groups)
        if len(digits) < _SHORTEST:
            continue
        if not digits.isascii():
            digits = _ascii_digits(digits)
        for_odd_end, for_even_end = _luhn_sums(digits)
        # Where each group starts in `digits`, and where the last one ends.
        bounds = list(itertools.accumulate(map(len, groups), initial=0))
        first = 0
        for end in bounds[1:]:
            while end - bounds[first] > _LONGEST:
                first += 1
            sums = for_odd_end if end % 2 else for_even_end
            begin_at = first
            while end - bounds[begin_at] >= _SHORTEST:
                begin = bounds[begin_at]
                if (sums[end] - sums[begin]) % 10 == 0 and _is_card_number(digits[begin:end]):
                    return True
                begin_at += 1
    return False


def redact_card_numbers(key: str) -> str:
    """A key (or any value) as an answer may show it: never a card number, at most 40
    characters. Only its first 256 characters are read: longer, it is cut anyway."""
    cut = key if len(key) <= 40 else key[:37] + "..."
    if holds_a_card_number(key[:256]) or holds_a_card_number(cut):
        return "(a key holding a card number)"
    return cut
