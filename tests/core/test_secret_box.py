"""core.secret_box: sealed values bound to their place, opened by the key that sealed them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.core.secret_box import SecretBox, SecretBoxError, key_id

OLD_KEY = b"o" * 40
NEW_KEY = b"n" * 40
PLACE = "webhooks.secret:7"


def test_a_sealed_value_is_versioned_text_naming_its_key_and_holds_no_plaintext() -> None:
    box = SecretBox(NEW_KEY, purpose="test")
    sealed = box.seal("whsec_plaintext", place=PLACE)
    assert re.fullmatch(r"v1:[0-9a-f]{8}:[A-Za-z0-9_-]+", sealed)
    assert sealed.split(":")[1] == key_id(NEW_KEY) == box.current_key_id
    assert "whsec" not in sealed and "plaintext" not in sealed
    # A random 96-bit nonce each time: the same secret never seals to the same text.
    assert box.seal("whsec_plaintext", place=PLACE) != sealed


@given(st.text(), st.integers(min_value=1))
def test_what_is_sealed_opens_to_itself(plaintext: str, row: int) -> None:
    box = SecretBox(NEW_KEY, purpose="test")
    assert box.open(box.seal(plaintext, place=f"t.c:{row}"), place=f"t.c:{row}") == plaintext


def test_a_value_moved_to_another_place_does_not_open() -> None:
    box = SecretBox(NEW_KEY, purpose="test")
    sealed = box.seal("whsec_x", place="webhooks.secret:7")
    for elsewhere in ("webhooks.secret:8", "webhooks.previous_secrets:7"):
        with pytest.raises(SecretBoxError, match="does not open"):
            box.open(sealed, place=elsewhere)


def test_an_altered_or_unsealed_value_does_not_open() -> None:
    box = SecretBox(NEW_KEY, purpose="test")
    sealed = box.seal("whsec_x", place=PLACE)
    flipped = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    with pytest.raises(SecretBoxError):
        box.open(flipped, place=PLACE)
    with pytest.raises(SecretBoxError, match="not a sealed value"):
        box.open("whsec_plaintext", place=PLACE)


def test_each_purpose_has_a_key_of_its_own() -> None:
    sealed = SecretBox(NEW_KEY, purpose="webhooks").seal("s", place=PLACE)
    with pytest.raises(SecretBoxError):
        SecretBox(NEW_KEY, purpose="other").open(sealed, place=PLACE)


def test_previous_keys_open_what_they_sealed_and_the_current_key_seals() -> None:
    old_box = SecretBox(OLD_KEY, purpose="test")
    sealed_before = old_box.seal("whsec_old", place=PLACE)
    rotated = SecretBox(NEW_KEY, purpose="test", previous=[OLD_KEY])
    assert rotated.open(sealed_before, place=PLACE) == "whsec_old"
    assert not rotated.is_current(sealed_before)
    resealed = rotated.seal("whsec_old", place=PLACE)
    assert rotated.is_current(resealed)
    # Once the old key is dropped, only what was sealed again opens.
    dropped = SecretBox(NEW_KEY, purpose="test")
    assert dropped.open(resealed, place=PLACE) == "whsec_old"
    with pytest.raises(SecretBoxError, match="neither TUCANO_SECRET_KEY"):
        dropped.open(sealed_before, place=PLACE)
