"""The PIX BR Code ("copia e cola"): the EMV QRCPS-MPM text a payer's bank app reads, as pure
functions.

The layout is the one the Banco Central's BR Code manual ("Manual de Padrões para Iniciação do
Pix") defines. Each field is a TLV: a 2-digit id, a 2-digit length, then the value (at most 99
characters); templates 26 and 62 hold TLVs of their own. `build_br_code` writes, in this order:

    00 = 01                      payload format indicator
    01 = 12                      point of initiation: the code is meant for one payment
    26 = 00 br.gov.bcb.pix       merchant account information: the Pix GUI
         01 <the Pix key>
    52 = <MCC>                   merchant category code, 0000 when not informed
    53 = 986                     currency: the real
    54 = <amount>                two decimals and a dot; left out when no amount is given
    58 = BR
    59 = <merchant name>         at most 25 characters, accents removed
    60 = <merchant city>         at most 15 characters, accents removed
    62 = 05 <txid>               1 to 25 of [A-Za-z0-9], or *** for a static code without one
    63 = <CRC>                   CRC-16/CCITT-FALSE of everything before it, `6304` included

The manual's own static examples leave out field 01, which it makes optional; this module always
writes it, so a code built from their inputs differs from them by that field and the CRC.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal

TLV_VALUE_MAX = 99
MERCHANT_NAME_MAX = 25
MERCHANT_CITY_MAX = 15
TXID_MAX = 25
AMOUNT_MAX_LENGTH = 13  # field 54's limit in the manual
TXID_NONE = "***"
PIX_GUI = "br.gov.bcb.pix"
PAYLOAD_FORMAT_INDICATOR = "01"
POINT_OF_INITIATION = "12"
CURRENCY_BRL = "986"
COUNTRY_CODE = "BR"
DEFAULT_MCC = "0000"
CRC_FIELD_HEADER = "6304"

# Ids and lengths are ASCII digits only: `\d` and str.isdigit would let other scripts' digits in.
_HEADER = re.compile(r"[0-9]{4}")
_TXID = re.compile(rf"[A-Za-z0-9]{{1,{TXID_MAX}}}")
_MCC = re.compile(r"[0-9]{4}")
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]+")
_CRC_TEXT = re.compile(r"[0-9A-F]{4}")
_CENT = Decimal("0.01")
# 10 integer digits, the dot and 2 decimals fill field 54's 13 characters.
_AMOUNT_LIMIT = Decimal(10) ** (AMOUNT_MAX_LENGTH - 3)


def crc16_ccitt_false(data: bytes) -> int:
    """CRC-16/CCITT-FALSE of `data`: poly 0x1021, init 0xFFFF, no reflection, no final xor."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


# Latin letters that no accent stripping turns into ASCII, written as their languages do.
_LETTERS = str.maketrans(
    {"ß": "ss", "Æ": "AE", "æ": "ae", "Œ": "OE", "œ": "oe", "Ø": "O", "ø": "o", "Ł": "L",
     "ł": "l", "Đ": "D", "đ": "d", "Þ": "Th", "þ": "th", "ẞ": "SS", "\u0131": "i"}
)  # fmt: skip


def br_code_text(value: str, max_length: int) -> str:
    """`value` as a BR Code carries it: accents removed, printable ASCII, spaces collapsed, cut."""
    unaccented = "".join(
        c
        for c in unicodedata.normalize("NFKD", value.translate(_LETTERS))
        if not unicodedata.combining(c)
    )
    # Whitespace becomes a space before the non-ASCII is dropped, so "Sao\nPaulo" keeps two words.
    spaced = "".join(" " if c.isspace() else c for c in unaccented)
    printable = "".join(_PRINTABLE_ASCII.findall(spaced))
    return " ".join(printable.split())[:max_length].strip()


def parse_tlv(payload: str) -> list[tuple[str, str]]:
    """The (id, value) pairs at the top level of `payload`; ValueError if it is malformed."""
    fields: list[tuple[str, str]] = []
    position = 0
    while position < len(payload):
        header = payload[position : position + 4]
        if not _HEADER.fullmatch(header):
            raise ValueError(f"malformed TLV at position {position}: {header!r} is not id+length")
        length = int(header[2:])
        value = payload[position + 4 : position + 4 + length]
        if len(value) != length:
            raise ValueError(
                f"truncated TLV {header[:2]} at position {position}: "
                f"{length} characters announced, {len(value)} left"
            )
        fields.append((header[:2], value))
        position += 4 + length
    return fields


def has_valid_crc(payload: str) -> bool:
    """Whether the last field of `payload` is `63` `04` and holds the CRC of all before it."""
    try:
        fields = parse_tlv(payload)
    except ValueError:
        return False
    if not fields or fields[-1][0] != "63" or payload[-8:-4] != CRC_FIELD_HEADER:
        return False
    written = fields[-1][1]
    expected = crc16_ccitt_false(payload[:-4].encode("utf-8"))
    return bool(_CRC_TEXT.fullmatch(written)) and int(written, 16) == expected


def _tlv(field_id: str, value: str) -> str:
    if len(value) > TLV_VALUE_MAX:
        raise ValueError(
            f"field {field_id} would have {len(value)} characters, at most {TLV_VALUE_MAX}"
        )
    return f"{field_id}{len(value):02d}{value}"


def _amount_text(amount: Decimal) -> str:
    if not isinstance(amount, Decimal):
        raise TypeError("the amount must be a Decimal (never a float)")
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"the amount must be a positive number of reais, not {amount}")
    if amount >= _AMOUNT_LIMIT:
        raise ValueError(f"the amount must be less than {_AMOUNT_LIMIT} (field 54 has 13 chars)")
    cents = amount.quantize(_CENT)
    if cents != amount:
        raise ValueError(f"the amount must have at most two decimals, not {amount}")
    return f"{cents:f}"


def _cleaned(value: str, max_length: int, what: str) -> str:
    cleaned = br_code_text(value, max_length)
    if not cleaned:
        raise ValueError(f"the {what} has no character a BR Code can carry (letters, digits)")
    return cleaned


def build_br_code(
    *,
    pix_key: str,
    merchant_name: str,
    merchant_city: str,
    txid: str,
    amount: Decimal | None = None,
    mcc: str = DEFAULT_MCC,
) -> str:
    """The BR Code text that asks for a PIX of `amount` to `pix_key`, marked with `txid`."""
    if not pix_key or not _PRINTABLE_ASCII.fullmatch(pix_key):
        raise ValueError("the Pix key must be non-empty printable ASCII")
    if txid != TXID_NONE and not _TXID.fullmatch(txid):
        raise ValueError(f"the txid must be 1 to {TXID_MAX} of [A-Za-z0-9], or {TXID_NONE!r}")
    if not _MCC.fullmatch(mcc):
        raise ValueError(f"the merchant category code must be 4 digits, not {mcc!r}")
    name = _cleaned(merchant_name, MERCHANT_NAME_MAX, "merchant name")
    city = _cleaned(merchant_city, MERCHANT_CITY_MAX, "merchant city")
    account = _tlv("00", PIX_GUI) + _tlv("01", pix_key)
    if len(account) > TLV_VALUE_MAX:
        raise ValueError(
            f"the Pix key is too long: field 26 would have {len(account)} characters, "
            f"at most {TLV_VALUE_MAX}"
        )
    fields = [
        ("00", PAYLOAD_FORMAT_INDICATOR),
        ("01", POINT_OF_INITIATION),
        ("26", account),
        ("52", mcc),
        ("53", CURRENCY_BRL),
    ]
    if amount is not None:
        fields.append(("54", _amount_text(amount)))
    fields += [
        ("58", COUNTRY_CODE),
        ("59", name),
        ("60", city),
        ("62", _tlv("05", txid)),
    ]
    body = "".join(_tlv(field_id, value) for field_id, value in fields) + CRC_FIELD_HEADER
    return f"{body}{crc16_ccitt_false(body.encode('ascii')):04X}"
