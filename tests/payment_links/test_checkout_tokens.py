from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tucano.auth.tokens import derive_key
from tucano.payment_links.checkout_tokens import (
    InvalidCheckoutToken,
    issue_checkout_token,
    verify_checkout_token,
)

KEY = derive_key(b"s" * 40, "checkout")
NOW = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)
LINK = uuid.uuid4()


def token(expires: datetime = NOW + timedelta(days=1), key: bytes = KEY) -> str:
    return issue_checkout_token(LINK, expires_at=expires, key=key)


def test_a_token_opens_its_own_link_until_it_expires() -> None:
    verify_checkout_token(token(), LINK, keys=[KEY], now=NOW)
    with pytest.raises(InvalidCheckoutToken, match="expired"):
        verify_checkout_token(token(), LINK, keys=[KEY], now=NOW + timedelta(days=1))


def test_another_link_altered_or_foreign_tokens_are_refused() -> None:
    with pytest.raises(InvalidCheckoutToken, match="another payment link"):
        verify_checkout_token(token(), uuid.uuid4(), keys=[KEY], now=NOW)
    altered = token()[:-3] + ("AAA" if not token().endswith("AAA") else "BBB")
    with pytest.raises(InvalidCheckoutToken):
        verify_checkout_token(altered, LINK, keys=[KEY], now=NOW)
    with pytest.raises(InvalidCheckoutToken):
        verify_checkout_token(
            token(key=derive_key(b"s" * 40, "access-token")), LINK, keys=[KEY], now=NOW
        )


def test_a_token_outlives_its_link_by_less_than_a_second_never_the_reverse() -> None:
    expires = NOW + timedelta(days=1, milliseconds=750)  # links expire to the millisecond
    last_moment = expires - timedelta(milliseconds=1)  # the link can still be paid
    verify_checkout_token(token(expires), LINK, keys=[KEY], now=last_moment)
    with pytest.raises(InvalidCheckoutToken, match="expired"):
        verify_checkout_token(token(expires), LINK, keys=[KEY], now=expires + timedelta(seconds=1))


def test_the_token_is_the_same_for_the_same_link() -> None:
    assert token() == token()


def test_a_token_of_a_previous_key_opens_its_link_while_that_key_is_kept() -> None:
    old = derive_key(b"o" * 40, "checkout")
    signed_before = token(key=old)
    verify_checkout_token(signed_before, LINK, keys=[KEY, old], now=NOW)
    with pytest.raises(InvalidCheckoutToken, match="signature"):
        verify_checkout_token(signed_before, LINK, keys=[KEY], now=NOW)
    with pytest.raises(InvalidCheckoutToken, match="another payment link"):
        verify_checkout_token(signed_before, uuid.uuid4(), keys=[KEY, old], now=NOW)
    altered = signed_before[:-3] + ("AAA" if not signed_before.endswith("AAA") else "BBB")
    with pytest.raises(InvalidCheckoutToken):
        verify_checkout_token(altered, LINK, keys=[KEY, old], now=NOW)
    with pytest.raises(InvalidCheckoutToken):
        verify_checkout_token(signed_before, LINK, keys=[], now=NOW)
