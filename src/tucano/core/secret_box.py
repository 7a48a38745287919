"""Secrets at rest: AES-256-GCM under a key derived from the service's secret key.

A sealed value is text, `v1:<key id>:<base64url of nonce + ciphertext + tag>`:
- the key is HKDF-SHA256 of the secret key, with salt `SALT` and the box's purpose as info,
  so each purpose (webhook signing secrets, ...) has a key of its own;
- the key id is 8 hex characters derived from the secret key (HKDF, info `KEY_ID_INFO`), so a
  value names the key that sealed it without revealing it;
- the nonce is 96 random bits per value;
- the associated data is the value's place (`table.column:row id`): a sealed value copied into
  another row or column does not open there.

A box holds the current secret key and the keys it had before (key rotation): it seals with
the current one and opens with whichever key sealed the value.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VERSION = "v1"
SALT = b"tucano secrets at rest v1"
KEY_ID_INFO = b"tucano secrets at rest: key id"
NONCE_BYTES = 12


class SecretBoxError(Exception):
    """A sealed value that cannot be opened: not sealed, sealed under a key the box does not
    hold, tampered with, or moved from another place."""


def _hkdf(secret_key: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=SALT, info=info).derive(secret_key)


def key_id(secret_key: bytes) -> str:
    """The id sealed values carry for the key derived from `secret_key`."""
    return _hkdf(secret_key, KEY_ID_INFO, 4).hex()


def is_sealed(stored: str) -> bool:
    return stored.startswith(VERSION + ":")


class SecretBox:
    """Seals and opens the secrets of one purpose (`purpose` is the HKDF info)."""

    def __init__(self, secret_key: bytes, *, purpose: str, previous: Sequence[bytes] = ()) -> None:
        info = purpose.encode()
        self.current_key_id = key_id(secret_key)
        self._ciphers: dict[str, AESGCM] = {}
        # The current key last, so it wins should a previous key be the same one.
        for key in (*previous, secret_key):
            self._ciphers[key_id(key)] = AESGCM(_hkdf(key, info, 32))

    def seal(self, plaintext: str, *, place: str) -> str:
        """`plaintext` sealed under the current key, for `place` alone."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current_key_id].encrypt(
            nonce, plaintext.encode(), place.encode()
        )
        body = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"{VERSION}:{self.current_key_id}:{body}"

    def open(self, stored: str, *, place: str) -> str:
        """The plaintext of a value sealed for `place`; SecretBoxError if it does not open."""
        version, _, rest = stored.partition(":")
        stored_key_id, _, body = rest.partition(":")
        if version != VERSION or not body:
            raise SecretBoxError(f"{place}: not a sealed value")
        cipher = self._ciphers.get(stored_key_id)
        if cipher is None:
            raise SecretBoxError(
                f"{place}: sealed under key {stored_key_id}, which is neither TUCANO_SECRET_KEY "
                "nor one of TUCANO_PREVIOUS_SECRET_KEYS"
            )
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plaintext = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], place.encode())
        except (InvalidTag, ValueError):
            raise SecretBoxError(f"{place}: does not open (altered, or sealed elsewhere)") from None
        return plaintext.decode()

    def is_current(self, stored: str) -> bool:
        """Whether `stored` is sealed under the current key (re-encryption skips it)."""
        version, _, rest = stored.partition(":")
        return version == VERSION and rest.partition(":")[0] == self.current_key_id
