"""Access tokens: HS256 JWTs that carry the client, its customer, partner and scopes.

Pure functions over a key and a clock reading, so they are tested without a server.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import TypeGuard

import jwt

ISSUER = "tucano"
AUDIENCE = "tucano-api"
ALGORITHM = "HS256"


class Scope(StrEnum):
    WEBHOOK_READ = "webhook.read"
    WEBHOOK_WRITE = "webhook.write"
    PAYMENT_LINK_READ = "payment-link.read"
    PAYMENT_LINK_WRITE = "payment-link.write"
    EVENTS_PUBLISH = "events.publish"
    PORTAL_SESSION = "portal.session"


# What a merchant's client gets when no scope is asked for; events.publish only on request.
# Clients keep the scopes they were created with: one made before portal.session has none.
MERCHANT_SCOPES: tuple[Scope, ...] = (
    Scope.WEBHOOK_READ,
    Scope.WEBHOOK_WRITE,
    Scope.PAYMENT_LINK_READ,
    Scope.PAYMENT_LINK_WRITE,
    Scope.PORTAL_SESSION,
)


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of one request."""

    client_id: str
    customer_id: int
    partner_id: int | None
    scopes: frozenset[str]


class InvalidToken(Exception):
    """The token cannot be trusted; the message says why in words safe to return to the caller."""


def derive_key(secret_key: bytes, purpose: str) -> bytes:
    """One key per use of the service secret: a token of one kind never passes as another."""
    return hmac.new(secret_key, purpose.encode(), hashlib.sha256).digest()


def encode_access_token(principal: Principal, *, key: bytes, now: datetime, ttl: timedelta) -> str:
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": principal.client_id,
        "cid": principal.customer_id,
        "pid": principal.partner_id,
        "scope": " ".join(sorted(principal.scopes)),
        "iat": int(now.timestamp()),
        "exp": int((now + ttl).timestamp()),
        "jti": secrets.token_urlsafe(12),
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def decode_access_token(token: str, *, key: bytes, now: datetime) -> Principal:
    """The principal of a valid token; InvalidToken (saying why) otherwise."""
    principal, expires_at = _verified(token, key)
    if now.timestamp() >= expires_at:
        raise InvalidToken("the access token has expired")
    return principal


def _is_id(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 2**63


@lru_cache(maxsize=4096)
def _verified(token: str, key: bytes) -> tuple[Principal, int]:
    """Signature and claims of a token, checked once: a client sends the same token for an
    hour, and verifying it costs more than the rest of a typical request's routing. Only tokens
    that verify are remembered (InvalidToken is not cached); expiry is checked on every use."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            # Expiry is checked by decode_access_token against tucano's clock, on every use.
            options={
                "require": ["exp", "iat", "sub", "cid"],
                "verify_exp": False,
                "verify_iat": False,
            },
        )
    except jwt.InvalidTokenError as exc:
        raise InvalidToken("the access token is malformed or its signature is invalid") from exc
    exp, cid, pid = claims.get("exp"), claims.get("cid"), claims.get("pid")
    if not isinstance(exp, int) or not _is_id(cid) or not (pid is None or _is_id(pid)):
        raise InvalidToken("the access token is malformed or its signature is invalid")
    scope = claims.get("scope", "")
    principal = Principal(
        client_id=str(claims["sub"]),
        customer_id=cid,
        partner_id=pid,
        scopes=frozenset(scope.split()) if isinstance(scope, str) else frozenset(),
    )
    return principal, exp
