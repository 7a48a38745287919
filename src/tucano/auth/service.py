"""Clients and the service's signing key: creating clients, checking their credentials."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from datetime import datetime

import structlog
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.auth.models import ApiClient, InstanceSecret
from tucano.auth.repository import ApiClientRepository
from tucano.auth.tokens import MERCHANT_SCOPES, Scope
from tucano.config import Settings
from tucano.core.card_numbers import redact_card_numbers
from tucano.core.clock import clock
from tucano.core.logs import exception_summary
from tucano.db.database import Database

_SECRET_KEY_NAME = "secret_key"  # noqa: S105 - the row name, not a secret
# Compared against when the client id is unknown, so a miss costs the same as a wrong secret.
log = structlog.get_logger("tucano.auth")
_UNKNOWN_CLIENT_HASH = hashlib.sha256(b"tucano-unknown-client").hexdigest()


def hash_client_secret(client_secret: str) -> str:
    return hashlib.sha256(client_secret.encode()).hexdigest()


def parse_scopes(requested: Iterable[str]) -> tuple[Scope, ...]:
    """Validate scope names; raises ValueError naming the unknown one, or when none is named
    (a client that may do nothing is a mistake, not a client)."""
    known = {s.value: s for s in Scope}
    result: list[Scope] = []
    for name in requested:
        for part in name.split():
            if part not in known:
                raise ValueError(
                    f"unknown scope {redact_card_numbers(part)!r}; known: {', '.join(known)}"
                )
            if known[part] not in result:
                result.append(known[part])
    if not result:
        raise ValueError(f"name at least one scope; known: {', '.join(known)}")
    return tuple(result)


async def create_client(
    session: AsyncSession,
    *,
    customer_id: int,
    partner_id: int | None = None,
    scopes: Iterable[Scope] = MERCHANT_SCOPES,
    name: str | None = None,
) -> tuple[ApiClient, str]:
    """Create a client; returns it with its secret, which is not kept and cannot be read again."""
    client_secret = "tsk_" + secrets.token_urlsafe(32)
    client = ApiClient(
        client_id="tci_" + secrets.token_hex(12),
        secret_hash=hash_client_secret(client_secret),
        customer_id=customer_id,
        partner_id=partner_id,
        scopes=" ".join(s.value for s in scopes),
        name=name,
        created_at=clock.now(),
    )
    await ApiClientRepository(session).add(client)
    return client, client_secret


async def authenticate_client(
    session: AsyncSession, *, client_id: str, client_secret: str
) -> ApiClient | None:
    """The client whose id and secret these are, or None; constant time in the secret."""
    # PostgreSQL text cannot hold NUL: such an id names no client, and must not reach a query.
    client = (
        None if "\x00" in client_id else await ApiClientRepository(session).by_client_id(client_id)
    )
    expected = client.secret_hash if client is not None else _UNKNOWN_CLIENT_HASH
    matches = hmac.compare_digest(expected, hash_client_secret(client_secret))
    if client is None or not matches or client.revoked_at is not None:
        return None
    return client


async def list_clients(session: AsyncSession, *, customer_id: int | None = None) -> list[ApiClient]:
    """Every API client (of one customer, if given), oldest first; secrets are not kept."""
    return list(await ApiClientRepository(session).every(customer_id=customer_id))


async def revoke_client(
    session: AsyncSession, *, client_id: str, now: datetime
) -> ApiClient | None:
    """Revoke a client (None if there is none by that id): it gets no more tokens, and every
    process refuses the tokens it holds within REVOCATION_REFRESH_SECONDS. Revoking again keeps
    the first time."""
    client = await ApiClientRepository(session).by_client_id(client_id, for_update=True)
    if client is not None and client.revoked_at is None:
        client.revoked_at = now
        await session.flush()
    return client


# How often each process reads which clients are revoked. Access tokens are checked without a
# database round trip (they are signed), so a revoked client's tokens keep working until the
# process next reads the list: at most this long.
REVOCATION_REFRESH_SECONDS = 5.0


class RevokedClients:
    """The ids of revoked API clients, as this process last read them."""

    def __init__(self) -> None:
        self.ids: frozenset[str] = frozenset()

    async def refresh(self, database: Database) -> None:
        # A read session: on SQLite the writing connection would wait for (and hold up) writers.
        async with database.read_session() as session:
            self.ids = frozenset(await ApiClientRepository(session).revoked_client_ids())

    async def refresh_at_start(self, database: Database) -> None:
        """Read the list before serving; with the database unreachable the service still
        starts (every request that needs the database answers 503 meanwhile), and keep_fresh
        reads it as soon as it can."""
        try:
            await self.refresh(database)
        except Exception as exc:
            log.warning("revoked_clients_unread", error=exception_summary(exc)[:300])

    async def keep_fresh(self, database: Database, stop: asyncio.Event) -> None:
        """Refresh every REVOCATION_REFRESH_SECONDS until `stop`; a failed read keeps the last
        list (the database is down: requests that need it fail anyway)."""
        failed = False
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=REVOCATION_REFRESH_SECONDS)
            if stop.is_set():
                return
            try:
                await self.refresh(database)
            except Exception as exc:
                if not failed:
                    log.warning("revoked_clients_unread", error=exception_summary(exc)[:300])
                failed = True
            else:
                failed = False


async def resolve_secret_key(settings: Settings, database: Database) -> bytes:
    """The key that signs tokens: TUCANO_SECRET_KEY, or in sandbox one generated once and kept
    in the database itself, so every process on that database agrees on it across restarts."""
    if settings.secret_key is not None:
        return settings.secret_key.get_secret_value().encode()
    for _ in range(3):
        # Read first without the write lock (on SQLite another process may hold it a while).
        async with database.read_session() as session:
            stored = await ApiClientRepository(session).instance_secret(_SECRET_KEY_NAME)
            if stored is not None:
                return stored.value.encode()
        async with database.session() as session:
            clients = ApiClientRepository(session)
            stored = await clients.instance_secret(_SECRET_KEY_NAME)
            if stored is not None:
                return stored.value.encode()
            await clients.add_instance_secret(
                InstanceSecret(
                    name=_SECRET_KEY_NAME, value=secrets.token_urlsafe(48), created_at=clock.now()
                )
            )
            try:
                await session.commit()
            except IntegrityError:
                continue  # another process generated it first; read theirs
    raise RuntimeError("could not store or read the generated secret key")
