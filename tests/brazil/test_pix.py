"""PIX end-to-end ids and txids: length, alphabet, and the minute an end-to-end id encodes."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.brazil.pix import (
    END_TO_END_ID_LENGTH,
    TUCANO_ISPB,
    TXID_MAX_LENGTH,
    TXID_MIN_LENGTH,
    end_to_end_id_time,
    is_valid_end_to_end_id,
    is_valid_txid,
    new_end_to_end_id,
    new_txid,
)

AT = datetime(2026, 11, 22, 14, 5, 59, 999_999, tzinfo=UTC)

rngs = st.integers(min_value=0, max_value=2**64).map(random.Random)
# Hypothesis takes naive bounds and attaches the time zones itself.
moments = st.datetimes(
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001
    max_value=datetime(2999, 12, 31),  # noqa: DTZ001
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-3)), timezone(timedelta(hours=14))]),
)
ispbs = st.text(string.digits, min_size=8, max_size=8)


def test_end_to_end_id_layout() -> None:
    e2e = new_end_to_end_id(ispb="12345678", at=AT, rng=random.Random(1))
    assert len(e2e) == END_TO_END_ID_LENGTH == 32
    assert e2e.startswith("E12345678" + "202611221405")
    assert set(e2e[21:]) <= set(string.ascii_uppercase + string.digits)
    assert is_valid_end_to_end_id(e2e)


def test_end_to_end_id_time_is_utc() -> None:
    # 23:30 in Sao Paulo (UTC-3) is 02:30 the next day in UTC.
    at = datetime(2026, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-3)))
    e2e = new_end_to_end_id(ispb=TUCANO_ISPB, at=at, rng=random.Random(1))
    assert e2e[9:21] == "202701010230"
    assert end_to_end_id_time(e2e) == datetime(2027, 1, 1, 2, 30, tzinfo=UTC)


def test_end_to_end_id_refuses_a_naive_time_and_a_bad_ispb() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        new_end_to_end_id(ispb=TUCANO_ISPB, at=datetime(2026, 1, 1))  # noqa: DTZ001
    for ispb in ["1234567", "123456789", "1234567A", ""]:
        with pytest.raises(ValueError, match="ISPB"):
            new_end_to_end_id(ispb=ispb, at=AT)


def test_end_to_end_ids_without_rng_differ() -> None:
    assert new_end_to_end_id(ispb=TUCANO_ISPB, at=AT) != new_end_to_end_id(ispb=TUCANO_ISPB, at=AT)


def test_sandbox_ispb_is_eight_digits() -> None:
    assert len(TUCANO_ISPB) == 8 and TUCANO_ISPB.isdigit()


@pytest.mark.parametrize(
    "value",
    [
        "E1393589320221110144001306556986",  # a real-world id (Celcoin)
        "E13935893202604281747Y3pL5YlGFRs",  # lower-case in the random part, as PSPs send
        "D99999999202611221405ABCDEFGHIJK",  # a refund
        "E99999999202402291405ABCDEFGHIJK",  # 29 February of a leap year
    ],
)
def test_well_formed_end_to_end_ids_are_valid(value: str) -> None:
    assert is_valid_end_to_end_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "X99999999202611221405ABCDEFGHIJK",  # neither E nor D
        "e99999999202611221405ABCDEFGHIJK",
        "E9999999A202611221405ABCDEFGHIJK",  # letter in the ISPB
        "E99999999202613221405ABCDEFGHIJK",  # month 13
        "E99999999202502291405ABCDEFGHIJK",  # 29 February of a common year
        "E99999999202611222405ABCDEFGHIJK",  # hour 24
        "E99999999202611221460ABCDEFGHIJK",  # minute 60
        "E99999999000011221405ABCDEFGHIJK",  # year 0
        "E99999999202611221405ABCDEFGHIJ",  # 31 characters
        "E99999999202611221405ABCDEFGHIJKL",  # 33 characters
        "E99999999202611221405ABCDEFGHIJ-",  # not alphanumeric
        "E99999999202611221405ABCDEFGHIJ\n",
    ],
)
def test_malformed_end_to_end_ids_are_invalid(value: str) -> None:
    assert not is_valid_end_to_end_id(value)
    assert end_to_end_id_time(value) is None


@given(rng=rngs, ispb=ispbs, at=moments)
def test_every_end_to_end_id_validates_and_encodes_its_minute(
    rng: random.Random, ispb: str, at: datetime
) -> None:
    e2e = new_end_to_end_id(ispb=ispb, at=at, rng=rng)
    assert len(e2e) == END_TO_END_ID_LENGTH
    assert is_valid_end_to_end_id(e2e)
    assert e2e[1:9] == ispb
    minute = at.astimezone(UTC).replace(second=0, microsecond=0)
    assert end_to_end_id_time(e2e) == minute


def test_txid_layout() -> None:
    txid = new_txid(random.Random(1))
    assert len(txid) == 32
    assert TXID_MIN_LENGTH <= len(txid) <= TXID_MAX_LENGTH
    assert is_valid_txid(txid)
    assert new_txid() != new_txid()


@given(rng=rngs)
def test_every_txid_validates(rng: random.Random) -> None:
    txid = new_txid(rng)
    assert len(txid) == 32
    assert set(txid) <= set(string.ascii_letters + string.digits)
    assert is_valid_txid(txid)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a" * 25, False),
        ("a" * 26, True),
        ("aB3" * 11 + "Zz", True),  # 35
        ("a" * 36, False),
        ("a" * 30 + "-", False),
        ("a" * 30 + "é", False),
    ],
)
def test_txid_length_and_alphabet(value: str, valid: bool) -> None:
    assert is_valid_txid(value) is valid
