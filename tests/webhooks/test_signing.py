"""Our signatures are exactly what the standardwebhooks library verifies."""

from __future__ import annotations

import base64
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tucano.webhooks.service import new_signing_secret
from tucano.webhooks.signing import delivery_headers, sign


@given(
    document=st.dictionaries(st.text(max_size=20), st.integers() | st.text(max_size=50)),
    message_id=st.text(alphabet="abcdef0123456789_", min_size=1),
)
def test_the_library_verifies_our_signature(document: dict[str, object], message_id: str) -> None:
    body = json.dumps(document, ensure_ascii=False).encode()
    secret = new_signing_secret()

    timestamp = int(time.time())
    headers = delivery_headers(
        secrets=[secret],
        message_id=message_id,
        timestamp=timestamp,
        body=body,
        event_type="PIX_OUTBOUND",
        user_agent="t",
    )
    Webhook(secret).verify(body, headers)


def test_known_vector() -> None:
    # Standard Webhooks' published example secret and message.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    signature = sign(
        secret=secret,
        message_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        timestamp=1614265330,
        body=b'{"test": 2432232314}',
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_two_secrets_give_two_signatures_each_verifying() -> None:
    old, new = new_signing_secret(), new_signing_secret()
    now = int(time.time())
    headers = delivery_headers(
        secrets=[new, old],
        message_id="evt_1",
        timestamp=now,
        body=b"{}",
        event_type="X",
        user_agent="t",
    )
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(b"{}", headers)
    Webhook(new).verify(b"{}", headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(b"{}", headers)


def test_secret_format() -> None:
    secret = new_signing_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret[6:])) == 24
