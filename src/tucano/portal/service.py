"""Portal sessions: a one-time session URL for a customer, exchanged once for a session cookie,
and that cookie read back on every page. Only SHA-256 hashes of the URL's token and of the
cookie are stored."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

from sqlalchemy.ext.asyncio import AsyncSession

from tucano.core.errors import AppError, ErrorCode
from tucano.core.languages import LANGUAGES, Language
from tucano.portal.models import PortalSession
from tucano.portal.repository import PortalSessionRepository

SHORTEST_LIFETIME = timedelta(seconds=60)
LONGEST_LIFETIME = timedelta(seconds=86400)
DEFAULT_LIFETIME = timedelta(seconds=3600)
START_PATH = "/portal/start"
_SECRET_BYTES = 32  # 256 random bits: a plain hash keeps them, no slow hash is needed
_SECRET_LENGTH = 43  # token_urlsafe(32)


@dataclass(frozen=True)
class SessionUrl:
    url: str
    expires_at: datetime


@dataclass(frozen=True)
class OpenSession:
    """What a portal page knows of its session."""

    id: int
    customer_id: int
    read_only: bool
    locale: Language | None  # None: the browser's Accept-Language decides
    expires_at: datetime

    @classmethod
    def of(cls, row: PortalSession) -> OpenSession:
        locale = row.locale if row.locale in LANGUAGES else None
        return cls(
            id=row.id,
            customer_id=row.customer_id,
            read_only=row.read_only,
            locale=locale,
            expires_at=row.expires_at,
        )


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _is_secret(value: str | None) -> bool:
    """A value secrets.token_urlsafe(32) could have made: anything else is looked up nowhere."""
    return (
        value is not None
        and len(value) == _SECRET_LENGTH
        and value.isascii()
        and all(c.isalnum() or c in "-_" for c in value)
    )


async def open_session_url(
    session: AsyncSession,
    *,
    customer_id: int,
    public_url: str,
    now: datetime,
    lifetime: timedelta = DEFAULT_LIFETIME,
    read_only: bool = False,
    locale: Language | None = None,
    client_id: str | None = None,
) -> SessionUrl:
    """A new session URL of `customer_id`'s portal, good once until `now + lifetime`."""
    if not SHORTEST_LIFETIME <= lifetime <= LONGEST_LIFETIME:
        raise ValueError("a portal session lasts from 60 seconds to 24 hours")
    token = secrets.token_urlsafe(_SECRET_BYTES)
    row = await PortalSessionRepository(session).add(
        PortalSession(
            customer_id=customer_id,
            read_only=read_only,
            locale=locale,
            start_token_hash=secret_hash(token),
            cookie_hash=None,
            client_id=client_id,
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    return SessionUrl(f"{public_url}{START_PATH}?token={quote(token, safe='')}", row.expires_at)


async def start_session(
    session: AsyncSession, *, token: str | None, now: datetime
) -> tuple[str, OpenSession]:
    """Use a session URL's token: the new session's cookie and the session. 401 for a token
    never given (or altered), 410 for one used already or expired."""
    if token is None or not _is_secret(token):
        raise AppError(ErrorCode.PORTAL_LINK_INVALID, errors=["the token is missing or altered"])
    sessions = PortalSessionRepository(session)
    cookie = secrets.token_urlsafe(_SECRET_BYTES)
    started = await sessions.start(
        start_token_hash=secret_hash(token), cookie_hash=secret_hash(cookie), now=now
    )
    if started is not None:
        return cookie, OpenSession.of(started)
    found = await sessions.by_start_token(secret_hash(token))
    if found is None:
        raise AppError(ErrorCode.PORTAL_LINK_INVALID, errors=["no session has this token"])
    if found.started_at is not None:
        raise AppError(ErrorCode.PORTAL_LINK_USED, errors=["a session URL opens the portal once"])
    raise AppError(ErrorCode.PORTAL_LINK_EXPIRED, errors=["the session URL has expired"])


async def session_of_cookie(
    session: AsyncSession, *, cookie: str | None, now: datetime
) -> OpenSession | None:
    """The open session this cookie holds, or None (no cookie, an altered one, a session that
    expired or was signed out of)."""
    if not _is_secret(cookie):
        return None
    assert cookie is not None
    row = await PortalSessionRepository(session).open_by_cookie(secret_hash(cookie), now=now)
    return None if row is None else OpenSession.of(row)


async def end_session(session: AsyncSession, *, session_id: int, now: datetime) -> None:
    """Sign out: the session's cookie opens nothing from now on."""
    await PortalSessionRepository(session).end(session_id, now=now)


async def prune_sessions(session: AsyncSession, *, now: datetime) -> int:
    """Delete a batch of expired sessions (their URLs and cookies open nothing any more)."""
    return await PortalSessionRepository(session).prune(expired_before=now)
