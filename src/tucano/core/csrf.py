"""Forgery protection of a page's forms, shared by the checkout and the portal: a form carries
HMAC(key, binding), where the binding is a secret of the browser's that another site cannot read
(a cookie's nonce, a session's id under the server's key), and a browser that says a request
comes from another site (`Sec-Fetch-Site`) is refused before anything is read."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

_NONCE_BYTES = 32
_LONGEST_TOKEN = 64


def new_nonce() -> str:
    return secrets.token_urlsafe(_NONCE_BYTES)


def is_nonce(value: str | None) -> bool:
    """A nonce new_nonce made (any other value is replaced, never signed)."""
    return (
        value is not None
        and len(value) == 43
        and value.isascii()
        and all(c.isalnum() or c in "-_" for c in value)
    )


def form_token(key: bytes, binding: str) -> str:
    """The form field for pages bound to `binding`."""
    mac = hmac.new(key, binding.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def is_genuine(key: bytes, binding: str, token: str | None) -> bool:
    if not token or len(token) > _LONGEST_TOKEN:
        return False
    return hmac.compare_digest(form_token(key, binding), token)


def comes_from_another_site(headers: Mapping[str, str]) -> bool:
    """What the browser says of the request's origin: only our own pages (or the user) count."""
    return headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none")
