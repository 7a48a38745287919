"""PIX identifiers: the end-to-end id of a transfer and the txid of a dynamic QR charge.

The Banco Central's end-to-end id is `E` (a payment; `D` for a refund), the 8-digit ISPB of the
institution that creates it, the minute it was made as `yyyyMMddHHmm` in UTC, and 11 alphanumeric
characters: 32 in all. A dynamic QR's txid is 26 to 35 of [a-zA-Z0-9]. The sandbox makes both
itself, so a payment it settles looks like one a real PSP would report.
"""

from __future__ import annotations

import random
import re
import secrets
import string
from datetime import UTC, datetime

END_TO_END_ID_LENGTH = 32
TXID_LENGTH = 32
TXID_MIN_LENGTH = 26
TXID_MAX_LENGTH = 35

# The sandbox's ISPB. A real ISPB is a participant's CNPJ root; this one is an evident placeholder
# so that a sandbox id is never read as coming from a real institution.
TUCANO_ISPB = "99999999"
SANDBOX_ISPB = TUCANO_ISPB  # the name events.samples uses

_TIMESTAMP_FORMAT = "%Y%m%d%H%M"
_GENERATED_ALPHABET = string.ascii_uppercase + string.digits
_TXID_ALPHABET = string.ascii_letters + string.digits
_END_TO_END_ID = re.compile(r"[ED](?P<ispb>[0-9]{8})(?P<at>[0-9]{12})[a-zA-Z0-9]{11}")
_ISPB = re.compile(r"[0-9]{8}")
_TXID = re.compile(r"[a-zA-Z0-9]{26,35}")


def _random_string(rng: random.Random | None, alphabet: str, length: int) -> str:
    # Ids in production must not be guessable; tests pass a seeded rng to get the same ones.
    source = rng if rng is not None else secrets.SystemRandom()
    return "".join(source.choice(alphabet) for _ in range(length))


def new_end_to_end_id(*, ispb: str, at: datetime, rng: random.Random | None = None) -> str:
    """`E` + ISPB + `at` in UTC as `yyyyMMddHHmm` + 11 of [A-Z0-9]; `at` must be timezone-aware."""
    if not _ISPB.fullmatch(ispb):
        raise ValueError("an ISPB is 8 digits")
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("the end-to-end id's time must be timezone-aware")
    stamp = at.astimezone(UTC).strftime(_TIMESTAMP_FORMAT)
    return f"E{ispb}{stamp}{_random_string(rng, _GENERATED_ALPHABET, 11)}"


def end_to_end_id_time(value: str) -> datetime | None:
    """The UTC minute encoded in an end-to-end id, or None if `value` is not one."""
    match = _END_TO_END_ID.fullmatch(value)
    if match is None:
        return None
    at = match["at"]
    try:
        return datetime(
            int(at[0:4]), int(at[4:6]), int(at[6:8]), int(at[8:10]), int(at[10:12]), tzinfo=UTC
        )
    except ValueError:  # no such month, day, hour or minute
        return None


def is_valid_end_to_end_id(value: str) -> bool:
    """True for `E` or `D`, 8 digits, a real `yyyyMMddHHmm` minute and 11 of [a-zA-Z0-9]."""
    return end_to_end_id_time(value) is not None


def new_txid(rng: random.Random | None = None) -> str:
    """A dynamic QR charge's txid: 32 of [a-zA-Z0-9]."""
    return _random_string(rng, _TXID_ALPHABET, TXID_LENGTH)


BR_CODE_TXID_LENGTH = 25  # the most a BR Code's field 62-05 carries


def new_br_code_txid(rng: random.Random | None = None) -> str:
    """The txid of a link's BR Code: 25 of [a-zA-Z0-9] (about 148 random bits)."""
    return _random_string(rng, _TXID_ALPHABET, BR_CODE_TXID_LENGTH)


def is_valid_txid(value: str) -> bool:
    """True for 26 to 35 of [a-zA-Z0-9], the txid a dynamic QR charge may carry."""
    return _TXID.fullmatch(value) is not None
