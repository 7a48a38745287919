"""Pix keys (chaves Pix), as pure functions: the five kinds the Banco Central's key directory
(DICT) holds, each written in the one form a BR Code carries.

- CPF: 11 digits; CNPJ: 14 characters (check digits verified, punctuation dropped);
- phone: a mobile number, `+55`, an area code Anatel assigns and 9 digits starting with 9
  (`+5511987654321`); landlines cannot be keys;
- e-mail: up to 77 characters, lower-cased: a local part of letters, digits and `._+-`, and
  a domain of labels of letters, digits and hyphens (not at either end of a label) ending in a
  top-level domain of letters;
- random key (EVP): a UUID, lower-case with hyphens (any case accepted).
"""

from __future__ import annotations

import re
import uuid

from tucano.brazil.documents import CNPJ_LENGTH, CPF_LENGTH, is_valid_cnpj, is_valid_cpf

PIX_KEY_MAX_LENGTH = 77  # the DICT's limit, which an e-mail key reaches

# Brazil's area codes (DDD), as Anatel assigns them.
_AREA_CODES = (
    "11|12|13|14|15|16|17|18|19|21|22|24|27|28|31|32|33|34|35|37|38|41|42|43|44|45|46|47|48|49"
    "|51|53|54|55|61|62|63|64|65|66|67|68|69|71|73|74|75|77|79|81|82|83|84|85|86|87|88|89"
    "|91|92|93|94|95|96|97|98|99"
)
_MOBILE = re.compile(r"\+55(?:" + _AREA_CODES + r")9[0-9]{8}")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(
    r"[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@(?:" + _LABEL + r"\.)+[A-Za-z]{2,63}", re.ASCII
)
_ASCII_DIGITS = frozenset("0123456789")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TYPED_SEPARATORS = re.compile(r"[\s().\-/]")


def parse_pix_key(text: str) -> str:
    """The key in its canonical form; ValueError naming the kinds accepted otherwise."""
    value = text.strip()
    if _UUID.fullmatch(value):
        return str(uuid.UUID(value))
    if "@" in value:
        if len(value) > PIX_KEY_MAX_LENGTH or not _EMAIL.fullmatch(value):
            raise ValueError(
                f"{_KINDS}: this e-mail address is not one (at most 77 characters: letters, "
                "digits and ._+- before the @, a domain such as example.com.br after it)"
            )
        return value.lower()
    compact = _TYPED_SEPARATORS.sub("", value)
    if compact.startswith("+"):
        if not _MOBILE.fullmatch(compact):
            raise ValueError(
                f"{_KINDS}: a phone key is a mobile number, +55, the area code and 9 digits "
                "starting with 9"
            )
        return compact
    upper = compact.upper()
    if len(upper) == CPF_LENGTH and _ASCII_DIGITS.issuperset(upper):
        if not is_valid_cpf(upper):
            raise ValueError(f"{_KINDS}: this CPF's check digits are wrong")
        return upper
    if len(upper) == CNPJ_LENGTH:
        if not is_valid_cnpj(upper):
            raise ValueError(f"{_KINDS}: this CNPJ's check digits are wrong")
        return upper
    raise ValueError(_KINDS)


_KINDS = (
    "a Pix key must be a CPF, a CNPJ, a mobile number (+5511987654321), an e-mail address "
    "or a random key (a UUID)"
)


def sandbox_pix_key(customer_id: int) -> str:
    """A random key (EVP) of the sandbox, the same for a customer every time."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://tucano.invalid/sandbox-pix/{customer_id}"))
