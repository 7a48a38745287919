"""Standard Webhooks signatures (https://www.standardwebhooks.com/), as pure functions.

Each delivery carries `webhook-id` (the event id, the same on every retry), `webhook-timestamp`
(Unix seconds of this attempt) and `webhook-signature`: `v1,<base64 HMAC-SHA256>` of
`{id}.{timestamp}.{body}` keyed with the base64-decoded part of the `whsec_` secret, one
space-separated entry per live secret: the current one, then each secret a rotation replaced
in the last 24 hours (its grace period), newest first.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache

import orjson

from tucano.core.clock import format_utc

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
# How long a secret replaced by a rotation keeps signing beside the new one.
ROTATION_GRACE = timedelta(hours=24)
# Replaced secrets kept signing at most: one more rotation within the grace drops the oldest
# (each adds a signature to every delivery's header).
PREVIOUS_SECRETS_KEPT = 9


@lru_cache(maxsize=4096)
def secret_key_bytes(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


@lru_cache(maxsize=4096)
def _keyed_hmac(secret: str) -> hmac.HMAC:
    # Keying an HMAC is a good part of its cost on short messages: key once per secret and copy.
    return hmac.new(secret_key_bytes(secret), digestmod=hashlib.sha256)


def sign(*, secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,<base64>` signature."""
    mac = _keyed_hmac(secret).copy()
    mac.update(f"{message_id}.{timestamp}.".encode())
    mac.update(body)
    return "v1," + base64.b64encode(mac.digest()).decode()


def signature_header(
    *, secrets: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> str:
    return " ".join(
        sign(secret=s, message_id=message_id, timestamp=timestamp, body=body) for s in secrets
    )


def delivery_headers(
    *,
    secrets: Sequence[str],
    message_id: str,
    timestamp: int,
    body: bytes,
    event_type: str,
    user_agent: str,
) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "user-agent": user_agent,
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(
            secrets=secrets, message_id=message_id, timestamp=timestamp, body=body
        ),
        "x-event-type": event_type,
    }


# A webhook keeps its replaced secrets as JSON in one column (`previous_secrets`): an array of
# [secret, ISO 8601 end of grace], newest first; NULL until its first rotation.


def previous_secrets(stored: str | None, *, now: datetime) -> list[tuple[str, datetime]]:
    """The replaced secrets of `stored` still in their grace at `now`, newest first."""
    if not stored:
        return []
    live = []
    for secret, until in orjson.loads(stored):
        expires = datetime.fromisoformat(until)
        if expires > now:
            live.append((secret, expires))
    return live


def signing_secrets(secret: str, stored_previous: str | None, *, now: datetime) -> tuple[str, ...]:
    """Every secret that signs a delivery made at `now`: `secret` (the current one) first, then
    the replaced ones still in their grace, newest first."""
    if not stored_previous:
        return (secret,)
    return (secret, *(s for s, _ in previous_secrets(stored_previous, now=now)))


def after_rotation(stored_previous: str | None, replaced: str, *, now: datetime) -> str:
    """`previous_secrets` once `replaced` (the current secret) is replaced at `now`: it signs
    for ROTATION_GRACE more, beside those replaced before whose grace has not ended."""
    kept = previous_secrets(stored_previous, now=now)[: PREVIOUS_SECRETS_KEPT - 1]
    return orjson.dumps(
        [[secret, format_utc(until)] for secret, until in [(replaced, now + ROTATION_GRACE), *kept]]
    ).decode()
