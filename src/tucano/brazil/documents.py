"""CPF and CNPJ: the Brazilian taxpayer numbers of people and of companies, as pure functions.

A registration number is one or the other, told apart by length once the punctuation
people type is gone: a CPF has 11 digits, a CNPJ 14 characters. From July 2026 Receita Federal
issues alphanumeric CNPJs to new companies: the first 12 characters (8 of root, 4 of branch order)
may be digits or upper-case letters, the last 2 stay numeric check digits. Both check digits
are the classic mod-11 ones; a CNPJ character is worth `ord(char) - 48`, so '0'..'9' keep their
values, 'A' is 17 and 'Z' is 42, and every numeric CNPJ issued before keeps its check digits.

Validators take the normalised form (`normalize_document`, which refuses any character but ASCII
digits, letters and the separators `.`, `-`, `/` and space); `parse_registration_number` does
both and raises `ValueError` with a message meant to follow the field name in an API error.
"""

from __future__ import annotations

import random
import string

CPF_LENGTH = 11
CNPJ_LENGTH = 14

# What people type between groups: the plain ASCII space, not a tab, line break or other blank.
_SEPARATORS = frozenset(".-/ ")
# ASCII only: `str.upper` would fold some other letters into ASCII ones (ß into SS).
_WRITTEN_WITH = frozenset(string.ascii_letters + string.digits) | _SEPARATORS
_DIGITS = frozenset(string.digits)
_CNPJ_BODY_CHARACTERS = frozenset(string.digits + string.ascii_uppercase)
_CNPJ_BODY_ALPHABET = string.digits + string.ascii_uppercase

_CPF_WEIGHTS_1 = (10, 9, 8, 7, 6, 5, 4, 3, 2)
_CPF_WEIGHTS_2 = (11, 10, 9, 8, 7, 6, 5, 4, 3, 2)
_CNPJ_WEIGHTS_1 = (5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2)
_CNPJ_WEIGHTS_2 = (6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2)

_EITHER = "must be a valid CPF (11 digits) or CNPJ (14 characters)"


_CHARACTERS = (
    "must be written in ASCII digits and letters, with only dots, dashes, slashes or spaces "
    "between them"
)


def normalize_document(text: str) -> str:
    """`text` without the dots, dashes, slashes and spaces people type, letters upper-cased;
    `ValueError` when it holds any other character (a control character, a tab or another
    blank, a letter outside ASCII)."""
    if not _WRITTEN_WITH.issuperset(text):
        raise ValueError(_CHARACTERS)
    return "".join(c for c in text if c not in _SEPARATORS).upper()


def _mod11_digit(values: tuple[int, ...], weights: tuple[int, ...]) -> int:
    remainder = sum(v * w for v, w in zip(values, weights, strict=True)) % 11
    return 0 if remainder < 2 else 11 - remainder


def cpf_check_digits(body: str) -> str:
    """The two check digits of a CPF whose first 9 digits are `body`."""
    if len(body) != CPF_LENGTH - 2 or not _DIGITS.issuperset(body):
        raise ValueError("a CPF body is 9 digits")
    values = tuple(int(c) for c in body)
    first = _mod11_digit(values, _CPF_WEIGHTS_1)
    second = _mod11_digit((*values, first), _CPF_WEIGHTS_2)
    return f"{first}{second}"


def cnpj_check_digits(body: str) -> str:
    """The two check digits of a CNPJ whose first 12 characters (digits or A-Z) are `body`."""
    if len(body) != CNPJ_LENGTH - 2 or not _CNPJ_BODY_CHARACTERS.issuperset(body):
        raise ValueError("a CNPJ body is 12 digits or upper-case letters")
    values = tuple(ord(c) - 48 for c in body)
    first = _mod11_digit(values, _CNPJ_WEIGHTS_1)
    second = _mod11_digit((*values, first), _CNPJ_WEIGHTS_2)
    return f"{first}{second}"


def _cpf_problem(value: str) -> str | None:
    """Why the normalised `value` is not a valid CPF, or None if it is."""
    if len(value) != CPF_LENGTH or not _DIGITS.issuperset(value):
        return "is not a valid CPF: a CPF is 11 digits"
    if len(set(value)) == 1:
        return "is not a valid CPF: all digits are the same"
    if cpf_check_digits(value[:-2]) != value[-2:]:
        return "is not a valid CPF: check digits do not match"
    return None


def _cnpj_problem(value: str) -> str | None:
    """Why the normalised `value` is not a valid CNPJ, or None if it is."""
    if len(value) != CNPJ_LENGTH:
        return "is not a valid CNPJ: a CNPJ is 14 characters"
    if not _CNPJ_BODY_CHARACTERS.issuperset(value[:-2]):
        return "is not a valid CNPJ: the first 12 characters must be digits or letters A-Z"
    if not _DIGITS.issuperset(value[-2:]):
        return "is not a valid CNPJ: the last 2 characters must be digits"
    if len(set(value)) == 1:
        return "is not a valid CNPJ: all characters are the same"
    if cnpj_check_digits(value[:-2]) != value[-2:]:
        return "is not a valid CNPJ: check digits do not match"
    return None


def is_valid_cpf(digits: str) -> bool:
    """True for a normalised CPF: 11 digits, not all the same, with matching check digits."""
    return _cpf_problem(digits) is None


def is_valid_cnpj(value: str) -> bool:
    """True for a normalised CNPJ: 12 of [0-9A-Z], 2 matching check digits, not all the same."""
    return _cnpj_problem(value) is None


def parse_registration_number(text: str) -> str:
    """The normalised CPF or CNPJ in `text`; `ValueError` saying what is wrong otherwise."""
    value = normalize_document(text)
    if len(value) == CPF_LENGTH:
        problem = _cpf_problem(value)
    elif len(value) == CNPJ_LENGTH:
        problem = _cnpj_problem(value)
    else:
        problem = _EITHER
    if problem is not None:
        raise ValueError(problem)
    return value


def format_cpf(text: str) -> str:
    """`123.456.789-09`: a valid CPF in the form people read."""
    value = normalize_document(text)
    problem = _cpf_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return f"{value[:3]}.{value[3:6]}.{value[6:9]}-{value[9:]}"


def format_cnpj(text: str) -> str:
    """`12.ABC.345/01DE-35`: a valid CNPJ in the form people read."""
    value = normalize_document(text)
    problem = _cnpj_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return f"{value[:2]}.{value[2:5]}.{value[5:8]}/{value[8:12]}-{value[12:]}"


def random_cpf(rng: random.Random) -> str:
    """A valid normalised CPF, for tests and sandbox sample data."""
    while True:
        body = "".join(rng.choice(string.digits) for _ in range(CPF_LENGTH - 2))
        value = body + cpf_check_digits(body)
        if is_valid_cpf(value):  # only the 10 repeated-digit numbers are refused here
            return value


def random_cnpj(rng: random.Random, *, alphanumeric: bool = False) -> str:
    """A valid normalised CNPJ, numeric unless `alphanumeric` (then letters may appear)."""
    alphabet = _CNPJ_BODY_ALPHABET if alphanumeric else string.digits
    while True:
        body = "".join(rng.choice(alphabet) for _ in range(CNPJ_LENGTH - 2))
        value = body + cnpj_check_digits(body)
        if is_valid_cnpj(value):  # only the body 000000000000 gives an all-same CNPJ
            return value
