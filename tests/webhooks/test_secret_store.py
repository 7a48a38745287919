"""Webhook signing secrets at rest, on each database: the rows hold sealed values only, the API
still gives the secrets, a value moved to another webhook does not open, and re-encryption
moves values sealed under a previous key to the current one."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, text, update

from tests.support.service import Merchant, RunningService
from tests.support.settings import TEST_SECRET_KEY, TEST_SECRET_STORE
from tucano.core.clock import clock
from tucano.core.secret_box import SecretBoxError
from tucano.db.database import Database
from tucano.webhooks.models import Webhook
from tucano.webhooks.secret_store import WebhookSecretStore
from tucano.webhooks.service import reseal_all

OLD_KEY = b"an-earlier-secret-key-" + b"o" * 32


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


async def create(merchant: Merchant) -> dict[str, Any]:
    response = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://hooks.example.com/at-rest", "eventType": "PIX_OUTBOUND"},
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def stored_row(database: Database, webhook_id: int) -> tuple[str, str | None]:
    """`secret` and `previous_secrets` as the database holds them, read with plain SQL."""
    async with database.read_session() as session:
        row = (
            await session.execute(
                text("SELECT secret, previous_secrets FROM webhooks WHERE id = :id"),
                {"id": webhook_id},
            )
        ).one()
    return row[0], row[1]


async def test_the_rows_hold_no_secret_and_the_api_still_gives_it(
    merchant: Merchant, service: RunningService
) -> None:
    created = await create(merchant)
    webhook_id = created["webhookId"]
    first = created["secret"]
    secret, previous = await stored_row(service.database, webhook_id)
    assert secret.startswith("v1:") and first not in secret and "whsec_" not in secret
    assert previous is None
    assert (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"] == first

    rotated = (await merchant.post(f"/webhook/v1/{webhook_id}/secret/rotate")).json()
    secret, previous = await stored_row(service.database, webhook_id)
    assert previous is not None and previous.startswith("v1:")
    for stored in (secret, previous):
        assert "whsec_" not in stored
        assert first not in stored and rotated["secret"] not in stored
    # The service's key seals them: the test store, with the same key, opens them.
    assert TEST_SECRET_STORE.open_previous(webhook_id, previous) is not None
    assert first in (TEST_SECRET_STORE.open_previous(webhook_id, previous) or "")
    read = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()
    assert read == rotated


async def test_a_secret_moved_to_another_webhook_does_not_open(
    merchant: Merchant, service: RunningService
) -> None:
    victim = await create(merchant)
    attacker = await create(merchant)
    sealed, _ = await stored_row(service.database, victim["webhookId"])
    async with service.database.session() as session:
        await session.execute(
            update(Webhook).where(Webhook.id == attacker["webhookId"]).values(secret=sealed)
        )
        await session.commit()
    async with service.database.read_session() as session:
        moved = await session.scalar(select(Webhook).where(Webhook.id == attacker["webhookId"]))
    assert moved is not None
    with pytest.raises(SecretBoxError, match="does not open"):
        WebhookSecretStore(TEST_SECRET_KEY.encode()).secret(moved)
    response = await merchant.get(f"/webhook/v1/{attacker['webhookId']}/secret")
    assert response.status_code == 500
    assert victim["secret"] not in response.text


async def test_reencryption_moves_values_sealed_under_a_previous_key_to_the_current_one(
    database: Database,
) -> None:
    old_store = WebhookSecretStore(OLD_KEY)
    async with database.session() as session:
        webhook = Webhook(
            customer_id=991_000_001,
            partner_id=None,
            target_url="https://hooks.example.com/rotated-key",
            event_type="PIX_OUTBOUND",
            is_active=True,
            secret="",
            created_at=clock.now(),
            updated_at=clock.now(),
        )
        session.add(webhook)
        await session.flush()
        old_store.seal(webhook, secret="whsec_before", previous_secrets='[["whsec_older", "x"]]')
        await session.commit()
        webhook_id = webhook.id
    before, _ = await stored_row(database, webhook_id)

    rotated_store = WebhookSecretStore(TEST_SECRET_KEY.encode(), previous_keys=[OLD_KEY])
    async with database.session() as session:
        assert await reseal_all(session, rotated_store) >= 1
        await session.commit()
    after, after_previous = await stored_row(database, webhook_id)
    assert after != before
    assert rotated_store.box.is_current(after)
    assert after_previous is not None and rotated_store.box.is_current(after_previous)
    # The old key is no longer needed: the current key alone opens them, unchanged.
    assert TEST_SECRET_STORE.signing_secrets(webhook_id, after, None, now=clock.now()) == (
        "whsec_before",
    )
    assert TEST_SECRET_STORE.open_previous(webhook_id, after_previous) == '[["whsec_older", "x"]]'
    with pytest.raises(SecretBoxError):
        WebhookSecretStore(OLD_KEY).signing_secrets(webhook_id, after, None, now=clock.now())
    async with database.session() as session:
        assert await reseal_all(session, rotated_store) == 0  # nothing left under the old key
        await session.rollback()
