"""The signed token in `urlPayment`: it names one link and expires with it.

An HS256 JWT keyed with the service secret derived for this purpose only (an access token can
never pass as a checkout token or the reverse). Deterministic for a link, so `urlPayment` reads the
same in every response without being stored.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import datetime

import jwt

AUDIENCE = "tucano-checkout"
KEY_PURPOSE = "checkout"


class InvalidCheckoutToken(Exception):
    """Altered, expired, or for another link."""


class ExpiredCheckoutToken(InvalidCheckoutToken):
    """Genuine and for this link, but its link has expired."""


def issue_checkout_token(link_uuid: uuid.UUID, *, expires_at: datetime, key: bytes) -> str:
    # A JWT's exp is in whole seconds: rounded up, so that the token never expires before its
    # link (at most a second after it; the checkout refuses an expired link by its own status).
    claims = {"aud": AUDIENCE, "sub": str(link_uuid), "exp": math.ceil(expires_at.timestamp())}
    return jwt.encode(claims, key, algorithm="HS256")


def verify_checkout_token(
    token: str, link_uuid: uuid.UUID, *, keys: Sequence[bytes], now: datetime
) -> None:
    """Return quietly when `token` opens the checkout of `link_uuid` at `now`; raise otherwise.
    `keys`: the current key, then those it replaced (a token signed by any of them is genuine)."""
    claims = None
    for key in keys:
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=["HS256"],
                audience=AUDIENCE,
                options={"require": ["exp", "sub"], "verify_exp": False},
            )
            break
        except jwt.InvalidSignatureError:
            continue
        except jwt.InvalidTokenError as exc:
            raise InvalidCheckoutToken(
                "the checkout token is malformed or its signature is invalid"
            ) from exc
    if claims is None:
        raise InvalidCheckoutToken("the checkout token is malformed or its signature is invalid")
    if claims.get("sub") != str(link_uuid):
        raise InvalidCheckoutToken("the checkout token is for another payment link")
    exp = claims.get("exp")
    if not isinstance(exp, int):
        raise InvalidCheckoutToken("the checkout token is malformed or its signature is invalid")
    if now.timestamp() >= exp:
        raise ExpiredCheckoutToken("the checkout token has expired")
