"""Webhook signing secrets sealed at rest: `webhooks.secret` and `webhooks.previous_secrets`
hold AES-GCM ciphertexts (core.secret_box's `v1` format) under a key derived from
TUCANO_SECRET_KEY, instead of the secrets themselves; `secret` becomes text (a sealed value is
longer than 64 characters).

The key: TUCANO_SECRET_KEY, which `tucano migrate` (and `tucano serve`) hand to the migration;
without it (sandbox), the key the service generated and keeps in `instance_secrets`, generated
here if the service never started. The downgrade opens them again with the same key.

Revision ID: 0016_secrets_at_rest
Revises: 0015_checkout
Create Date: 2026-12-02
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import context, op
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

revision: str = "0016_secrets_at_rest"
down_revision: str | None = "0015_checkout"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# core.secret_box's v1 format and webhooks.secret_store's purpose and places, written out: a
# migration must not change with later app code.
_SALT = b"tucano secrets at rest v1"
_KEY_ID_INFO = b"tucano secrets at rest: key id"
_PURPOSE = b"tucano webhook signing secrets"
_NONCE_BYTES = 12


def _hkdf(key: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=_SALT, info=info).derive(key)


class _Box:
    def __init__(self, secret_key: bytes) -> None:
        self.key_id = _hkdf(secret_key, _KEY_ID_INFO, 4).hex()
        self.cipher = AESGCM(_hkdf(secret_key, _PURPOSE, 32))

    def seal(self, plaintext: str, place: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self.cipher.encrypt(nonce, plaintext.encode(), place.encode())
        body = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"v1:{self.key_id}:{body}"

    def open(self, stored: str, place: str) -> str:
        version, stored_key_id, body = stored.split(":", 2)
        if version != "v1" or stored_key_id != self.key_id:
            raise RuntimeError(
                f"{place} is sealed under another key than TUCANO_SECRET_KEY: set the key it "
                "was sealed under, or run `tucano secrets reencrypt` first"
            )
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return self.cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], place.encode()).decode()


def _secret_key(bind: sa.engine.Connection, *, generate: bool) -> bytes:
    configured = context.config.attributes.get("secret_key")
    if configured:
        return str(configured).encode()
    # As auth.service.resolve_secret_key: the sandbox's generated key, made if not there yet.
    stored = bind.execute(
        sa.text("SELECT value FROM instance_secrets WHERE name = 'secret_key'")
    ).scalar()
    if stored is None:
        if not generate:
            raise RuntimeError("no TUCANO_SECRET_KEY given and none generated: cannot decrypt")
        stored = secrets.token_urlsafe(48)
        now = datetime.now(UTC)
        bind.execute(
            sa.text(
                "INSERT INTO instance_secrets (name, value, created_at)"
                " VALUES ('secret_key', :value, :now)"
            ),
            {
                "value": stored,
                # As db.UTCDateTime stores it: naive UTC text on SQLite.
                "now": now.strftime("%Y-%m-%d %H:%M:%S.%f")
                if bind.dialect.name == "sqlite"
                else now,
            },
        )
    return str(stored).encode()


def _retype_secret(bind: sa.engine.Connection, sql_type: str) -> None:
    if bind.dialect.name == "postgresql":
        op.execute(f"ALTER TABLE webhooks ALTER COLUMN secret TYPE {sql_type}")
        return
    # SQLite cannot change a column's type: a new column takes the old one's place (no table
    # rebuild, which would have to keep AUTOINCREMENT, migration 0006, by hand).
    op.execute(f"ALTER TABLE webhooks ADD COLUMN secret_retyped {sql_type} NOT NULL DEFAULT ''")
    op.execute("UPDATE webhooks SET secret_retyped = secret")
    op.execute("ALTER TABLE webhooks DROP COLUMN secret")
    op.execute("ALTER TABLE webhooks RENAME COLUMN secret_retyped TO secret")


def _rewrite(bind: sa.engine.Connection, change: str, *, generate: bool) -> None:
    rows = bind.execute(sa.text("SELECT id, secret, previous_secrets FROM webhooks")).all()
    if not rows:
        return
    box = _Box(_secret_key(bind, generate=generate))
    for webhook_id, secret, previous in rows:
        places = (f"webhooks.secret:{webhook_id}", f"webhooks.previous_secrets:{webhook_id}")
        rewrite = box.seal if change == "seal" else box.open
        bind.execute(
            sa.text(
                "UPDATE webhooks SET secret = :secret, previous_secrets = :previous WHERE id = :id"
            ),
            {
                "secret": rewrite(secret, places[0]),
                "previous": None if previous is None else rewrite(previous, places[1]),
                "id": webhook_id,
            },
        )


def upgrade() -> None:
    bind = op.get_bind()
    _retype_secret(bind, "TEXT")
    _rewrite(bind, "seal", generate=True)


def downgrade() -> None:
    bind = op.get_bind()
    _rewrite(bind, "open", generate=False)
    _retype_secret(bind, "VARCHAR(64)")
