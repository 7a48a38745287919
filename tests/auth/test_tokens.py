"""Access tokens as pure functions: round trip, expiry, tampering."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.auth.tokens import (
    InvalidToken,
    Principal,
    decode_access_token,
    derive_key,
    encode_access_token,
)

KEY = derive_key(b"k" * 40, "access-token")
NOW = datetime(2026, 1, 15, 10, 30, tzinfo=UTC)


@given(
    customer_id=st.integers(min_value=1, max_value=2**53),
    partner_id=st.none() | st.integers(min_value=1, max_value=2**53),
    scopes=st.frozensets(st.sampled_from(["webhook.read", "webhook.write", "events.publish"])),
)
def test_round_trip_keeps_the_principal(
    customer_id: int, partner_id: int | None, scopes: frozenset[str]
) -> None:
    principal = Principal("tci_abc", customer_id, partner_id, scopes)
    token = encode_access_token(principal, key=KEY, now=NOW, ttl=timedelta(hours=1))
    assert decode_access_token(token, key=KEY, now=NOW) == principal


def test_expiry_is_exact() -> None:
    principal = Principal("tci_abc", 1, None, frozenset())
    token = encode_access_token(principal, key=KEY, now=NOW, ttl=timedelta(seconds=60))
    assert decode_access_token(token, key=KEY, now=NOW + timedelta(seconds=59))
    with pytest.raises(InvalidToken, match="expired"):
        decode_access_token(token, key=KEY, now=NOW + timedelta(seconds=60))


def test_keys_are_separated_by_purpose() -> None:
    assert derive_key(b"k" * 40, "access-token") != derive_key(b"k" * 40, "checkout")
    principal = Principal("tci_abc", 1, None, frozenset())
    token = encode_access_token(
        principal, key=derive_key(b"k" * 40, "checkout"), now=NOW, ttl=timedelta(hours=1)
    )
    with pytest.raises(InvalidToken):
        decode_access_token(token, key=KEY, now=NOW)


@pytest.mark.parametrize("customer_id", [0, -1, 2**63, True])
def test_a_token_whose_customer_is_no_valid_id_is_refused(customer_id: int) -> None:
    # Only a holder of the key could make one; it is still refused rather than trusted.
    token = encode_access_token(
        Principal("tci_abc", customer_id, None, frozenset()),
        key=KEY,
        now=NOW,
        ttl=timedelta(hours=1),
    )
    with pytest.raises(InvalidToken):
        decode_access_token(token, key=KEY, now=NOW)


@given(position=st.integers(min_value=0), char=st.sampled_from("AbZ09-_"))
def test_any_change_to_a_token_is_detected(position: int, char: str) -> None:
    token = encode_access_token(
        Principal("tci_abc", 7, None, frozenset({"webhook.read"})),
        key=KEY,
        now=NOW,
        ttl=timedelta(hours=1),
    )
    index = position % len(token)
    if token[index] == "." or token[index] == char:
        return
    tampered = token[:index] + char + token[index + 1 :]
    try:
        decoded = decode_access_token(tampered, key=KEY, now=NOW)
    except InvalidToken:
        return
    # base64url's last character can carry unused bits; the claims must then be unchanged.
    assert decoded == Principal("tci_abc", 7, None, frozenset({"webhook.read"}))
