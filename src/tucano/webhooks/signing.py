"""Standard Webhooks signatures (https://www.standardwebhooks.com/), as pure functions.

Each delivery carries `webhook-id` (the event id, the same on every retry), `webhook-timestamp`
(Unix seconds of this attempt) and `webhook-signature`: `v1,<base64 HMAC-SHA256>` of
`{id}.{timestamp}.{body}` keyed with the base64-decoded part of the `whsec_` secret, one
space-separated entry per live secret (two while a rotated secret is in its grace period).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from functools import lru_cache

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret


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
