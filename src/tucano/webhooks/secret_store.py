"""Webhook signing secrets as the database keeps them: sealed (core.secret_box) under a key
derived from TUCANO_SECRET_KEY for this purpose alone, each bound to its webhook's row and
column, so neither a copy of the database nor a value moved to another webhook reveals one.

`secret` holds the current secret sealed; `previous_secrets` the JSON list of replaced secrets
(webhooks.signing) sealed as one value, or NULL."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from tucano.auth.service import resolve_secret_key
from tucano.config import Settings
from tucano.core.secret_box import SecretBox
from tucano.db.database import Database
from tucano.webhooks.models import Webhook
from tucano.webhooks.signing import signing_secrets

# The HKDF info of this purpose's key (core.secret_box); changing it makes every value unreadable.
PURPOSE = "tucano webhook signing secrets"
# Opened values kept per process, by (place, sealed value): a delivery signs without decrypting.
OPENED_KEPT = 8192


def secret_place(webhook_id: int) -> str:
    return f"webhooks.secret:{webhook_id}"


def previous_place(webhook_id: int) -> str:
    return f"webhooks.previous_secrets:{webhook_id}"


class WebhookSecretStore:
    """Seals the secrets a webhook row stores, and opens them (cached) for signing and reading."""

    def __init__(self, secret_key: bytes, *, previous_keys: Sequence[bytes] = ()) -> None:
        self.box = SecretBox(secret_key, purpose=PURPOSE, previous=previous_keys)
        self._open = functools.lru_cache(maxsize=OPENED_KEPT)(self._open_uncached)

    @classmethod
    def of(cls, secret_key: bytes, settings: Settings) -> WebhookSecretStore:
        """The store of a process whose secret key is `secret_key`, opening values sealed under
        TUCANO_PREVIOUS_SECRET_KEYS too."""
        previous = [key.get_secret_value().encode() for key in settings.previous_secret_keys]
        return cls(secret_key, previous_keys=previous)

    def seal(self, webhook: Webhook, *, secret: str, previous_secrets: str | None) -> None:
        """Put these plaintexts in `webhook`'s columns, sealed (its id must be known: flushed)."""
        webhook.secret = self.box.seal(secret, place=secret_place(webhook.id))
        webhook.previous_secrets = (
            None
            if previous_secrets is None
            else self.box.seal(previous_secrets, place=previous_place(webhook.id))
        )

    def secret(self, webhook: Webhook) -> str:
        """The current signing secret of `webhook`, opened."""
        return self._open(secret_place(webhook.id), webhook.secret)

    def previous_secrets(self, webhook: Webhook) -> str | None:
        """The replaced secrets of `webhook` (webhooks.signing's JSON list), opened."""
        return self.open_previous(webhook.id, webhook.previous_secrets)

    def open_previous(self, webhook_id: int, stored: str | None) -> str | None:
        return None if stored is None else self._open(previous_place(webhook_id), stored)

    def signing_secrets(
        self, webhook_id: int, stored_secret: str, stored_previous: str | None, *, now: datetime
    ) -> tuple[str, ...]:
        """webhooks.signing.signing_secrets of a webhook's columns as stored."""
        return signing_secrets(
            self._open(secret_place(webhook_id), stored_secret),
            self.open_previous(webhook_id, stored_previous),
            now=now,
        )

    def reseal(self, webhook: Webhook) -> bool:
        """Seal `webhook`'s values under the current key if another key sealed them; whether it
        did (`tucano secrets reencrypt`)."""
        stale = not self.box.is_current(webhook.secret) or (
            webhook.previous_secrets is not None
            and not self.box.is_current(webhook.previous_secrets)
        )
        if stale:
            self.seal(
                webhook,
                secret=self.secret(webhook),
                previous_secrets=self.previous_secrets(webhook),
            )
        return stale

    def _open_uncached(self, place: str, stored: str) -> str:
        return self.box.open(stored, place=place)


async def load_secret_store(settings: Settings, database: Database) -> WebhookSecretStore:
    """The store for a process on `database`: its key is the one that signs tokens
    (TUCANO_SECRET_KEY, or the sandbox's generated key)."""
    return WebhookSecretStore.of(await resolve_secret_key(settings, database), settings)
