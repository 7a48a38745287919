"""Pix keys (chaves Pix), as pure functions: the five kinds the Banco Central registers, each
written in the one form a BR Code carries.

- CPF: 11 digits; CNPJ: 14 characters (check digits verified, punctuation dropped);
- phone: `+55`, the 2-digit area code and the 8- or 9-digit number (`+5511987654321`);
- e-mail: up to 77 characters, lower-cased;
- random key (EVP): a UUID, lower-case with hyphens.
"""

from __future__ import annotations

import re
import uuid

from tucano.brazil.documents import CNPJ_LENGTH, CPF_LENGTH, is_valid_cnpj, is_valid_cpf

PIX_KEY_MAX_LENGTH = 77  # the DICT's limit, which an e-mail key reaches

_PHONE = re.compile(r"\+55[1-9][0-9][0-9]{8,9}")
_EMAIL = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TYPED_SEPARATORS = re.compile(r"[\s().\-/]")


def parse_pix_key(text: str) -> str:
    """The key in its canonical form; ValueError naming the kinds accepted otherwise."""
    value = text.strip()
    if _UUID.fullmatch(value):
        return str(uuid.UUID(value))
    if "@" in value:
        if len(value) > PIX_KEY_MAX_LENGTH or not _EMAIL.fullmatch(value):
            raise ValueError(f"{_KINDS}: this e-mail address is not one (at most 77 characters)")
        return value.lower()
    compact = _TYPED_SEPARATORS.sub("", value)
    if compact.startswith("+"):
        if not _PHONE.fullmatch(compact):
            raise ValueError(f"{_KINDS}: a phone key is +55, the area code and the number")
        return compact
    upper = compact.upper()
    if len(upper) == CPF_LENGTH and upper.isdigit():
        if not is_valid_cpf(upper):
            raise ValueError(f"{_KINDS}: this CPF's check digits are wrong")
        return upper
    if len(upper) == CNPJ_LENGTH:
        if not is_valid_cnpj(upper):
            raise ValueError(f"{_KINDS}: this CNPJ's check digits are wrong")
        return upper
    raise ValueError(_KINDS)


_KINDS = (
    "a Pix key must be a CPF, a CNPJ, a phone number (+5511987654321), an e-mail address "
    "or a random key (a UUID)"
)


def sandbox_pix_key(customer_id: int) -> str:
    """A random key (EVP) of the sandbox, the same for a customer every time."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://tucano.invalid/sandbox-pix/{customer_id}"))
