"""Cross-site request forgery protection of the checkout's forms: a double-submitted secret.

The page sets a random nonce in an HttpOnly, SameSite=Lax cookie and puts HMAC(key, link and
nonce) in each form (core/csrf.py); a submission must carry both, matching. Another site can
make a browser post to the form but can neither read the cookie nor compute the field.
"""

from __future__ import annotations

import uuid

from tucano.core import csrf
from tucano.core.csrf import comes_from_another_site, is_nonce, new_nonce

COOKIE = "tucano_checkout"
FIELD = "csrf_token"
KEY_PURPOSE = "checkout-csrf"

__all__ = ["comes_from_another_site", "form_token", "is_genuine", "is_nonce", "new_nonce"]


def form_token(key: bytes, *, nonce: str, link_uuid: uuid.UUID) -> str:
    """The form field for this link's page in a browser holding `nonce`."""
    return csrf.form_token(key, f"{link_uuid}:{nonce}")


def is_genuine(key: bytes, *, nonce: str | None, link_uuid: uuid.UUID, token: str | None) -> bool:
    if not is_nonce(nonce):
        return False
    return csrf.is_genuine(key, f"{link_uuid}:{nonce}", token)
