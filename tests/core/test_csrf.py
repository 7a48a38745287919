"""Forgery tokens: a form's field is good only for the binding it was made for, under its key."""

from __future__ import annotations

from tucano.core.csrf import comes_from_another_site, form_token, is_genuine, is_nonce, new_nonce

KEY = b"k" * 32


def test_a_token_is_good_for_its_binding_and_key_only() -> None:
    token = form_token(KEY, "portal-session:1")
    assert is_genuine(KEY, "portal-session:1", token)
    assert not is_genuine(KEY, "portal-session:2", token)
    assert not is_genuine(b"x" * 32, "portal-session:1", token)
    assert not is_genuine(KEY, "portal-session:1", token[:-1] + ("A" if token[-1] != "A" else "B"))
    assert not is_genuine(KEY, "portal-session:1", None)
    assert not is_genuine(KEY, "portal-session:1", "")
    assert not is_genuine(KEY, "portal-session:1", token * 3)


def test_nonces_are_random_and_recognised() -> None:
    first, second = new_nonce(), new_nonce()
    assert first != second
    assert is_nonce(first) and is_nonce(second)
    assert not is_nonce(None)
    assert not is_nonce(first[:-1] + "!")


def test_a_request_another_site_sends_is_told_apart() -> None:
    assert comes_from_another_site({"sec-fetch-site": "cross-site"})
    assert comes_from_another_site({"sec-fetch-site": "same-site"})
    assert not comes_from_another_site({"sec-fetch-site": "same-origin"})
    assert not comes_from_another_site({"sec-fetch-site": "none"})
    assert not comes_from_another_site({})  # an older browser, or not a browser
