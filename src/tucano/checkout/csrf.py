"""Cross-site request forgery protection of the checkout's forms: a double-submitted secret.

The page sets a random nonce in an HttpOnly, SameSite=Lax cookie and puts HMAC(key, link and
nonce) in each form; a submission must carry both, matching. Another site can make a browser
post to the form but can neither read the cookie nor compute the field. A browser that says
the request comes from another site (`Sec-Fetch-Site`) is refused before anything is read.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Mapping

COOKIE = "tucano_checkout"
FIELD = "csrf_token"
KEY_PURPOSE = "checkout-csrf"
_NONCE_BYTES = 32


def new_nonce() -> str:
    return secrets.token_urlsafe(_NONCE_BYTES)


def is_nonce(value: str | None) -> bool:
    """A nonce this module made (any other cookie value is replaced, never signed)."""
    return (
        value is not None
        and len(value) == 43
        and value.isascii()
        and all(c.isalnum() or c in "-_" for c in value)
    )


def form_token(key: bytes, *, nonce: str, link_uuid: uuid.UUID) -> str:
    """The form field for this link's page in a browser holding `nonce`."""
    mac = hmac.new(key, f"{link_uuid}:{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def is_genuine(key: bytes, *, nonce: str | None, link_uuid: uuid.UUID, token: str | None) -> bool:
    if not is_nonce(nonce) or not token or len(token) > 64:
        return False
    assert nonce is not None
    return hmac.compare_digest(form_token(key, nonce=nonce, link_uuid=link_uuid), token)


def comes_from_another_site(headers: Mapping[str, str]) -> bool:
    """What the browser says of the request's origin: only our own pages (or the user) count."""
    return headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none")
