"""Our signatures are exactly what the standardwebhooks library verifies."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tucano.webhooks.service import new_signing_secret
from tucano.webhooks.signing import (
    PREVIOUS_SECRETS_KEPT,
    after_rotation,
    delivery_headers,
    previous_secrets,
    sign,
    signing_secrets,
)


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


# --- rotation: which secrets sign ---------------------------------------------------------------

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_a_replaced_secret_signs_for_24_hours_after_it_was_replaced() -> None:
    stored = after_rotation(None, "whsec_s0", now=T0)
    assert signing_secrets("whsec_s1", stored, now=T0) == ("whsec_s1", "whsec_s0")
    last_moment = T0 + timedelta(hours=24) - timedelta(milliseconds=1)
    assert signing_secrets("whsec_s1", stored, now=last_moment) == ("whsec_s1", "whsec_s0")
    assert signing_secrets("whsec_s1", stored, now=T0 + timedelta(hours=24)) == ("whsec_s1",)


def test_each_replaced_secret_keeps_its_own_grace() -> None:
    first = after_rotation(None, "whsec_s0", now=T0)
    second = after_rotation(first, "whsec_s1", now=T0 + timedelta(hours=1))
    assert signing_secrets("whsec_s2", second, now=T0 + timedelta(hours=2)) == (
        "whsec_s2",
        "whsec_s1",
        "whsec_s0",
    )
    # s0 leaves 24 hours after its own replacement, s1 an hour later.
    assert signing_secrets("whsec_s2", second, now=T0 + timedelta(hours=24, minutes=30)) == (
        "whsec_s2",
        "whsec_s1",
    )
    assert [until for _, until in previous_secrets(second, now=T0)] == [
        T0 + timedelta(hours=25),
        T0 + timedelta(hours=24),
    ]


def test_rotations_beyond_the_cap_drop_the_oldest_and_expired_ones_are_forgotten() -> None:
    stored = None
    for n in range(PREVIOUS_SECRETS_KEPT + 3):
        stored = after_rotation(stored, f"whsec_s{n}", now=T0 + timedelta(minutes=n))
    newest_first = [f"whsec_s{n}" for n in reversed(range(PREVIOUS_SECRETS_KEPT + 3))]
    assert [s for s, _ in previous_secrets(stored, now=T0 + timedelta(hours=1))] == newest_first[
        :PREVIOUS_SECRETS_KEPT
    ]
    # A rotation a day later keeps none of them: their graces have all ended.
    later = after_rotation(stored, "whsec_new", now=T0 + timedelta(days=2))
    assert [s for s, _ in previous_secrets(later, now=T0 + timedelta(days=2))] == ["whsec_new"]
