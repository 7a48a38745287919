"""Portal sessions in the database: a URL opens one session once, until it expires; only hashes
of its token and of the cookie are kept."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select

from tests.support.service import new_customer_id
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.db.database import Database
from tucano.portal import service
from tucano.portal.models import PortalSession

PUBLIC_URL = "https://pay.example.com"


def token_of(url: str) -> str:
    assert url.startswith(f"{PUBLIC_URL}/portal/start?token=")
    return parse_qs(urlsplit(url).query)["token"][0]


async def new_url(database: Database, customer_id: int, **options: object) -> service.SessionUrl:
    async with database.session() as session:
        made = await service.open_session_url(
            session, customer_id=customer_id, public_url=PUBLIC_URL, now=clock.now(), **options
        )
        await session.commit()
    return made


async def start(database: Database, token: str) -> tuple[str, service.OpenSession]:
    async with database.session() as session:
        started = await service.start_session(session, token=token, now=clock.now())
        await session.commit()
    return started


async def test_a_url_opens_one_session_of_its_customer_once(database: Database) -> None:
    customer_id = new_customer_id()
    with clock.freeze():
        url = await new_url(database, customer_id, read_only=True, locale="en")
        assert url.expires_at == clock.now() + timedelta(hours=1)
        token = token_of(url.url)
        cookie, opened = await start(database, token)
        assert (opened.customer_id, opened.read_only, opened.locale) == (customer_id, True, "en")
        assert opened.expires_at == url.expires_at
        with pytest.raises(AppError) as again:
            await start(database, token)
        assert again.value.code is ErrorCode.PORTAL_LINK_USED
        async with database.read_session() as session:
            held = await service.session_of_cookie(session, cookie=cookie, now=clock.now())
            row = (
                await session.execute(
                    select(PortalSession).where(PortalSession.customer_id == customer_id)
                )
            ).scalar_one()
    assert held == opened
    # Neither secret is in the database, only its hash.
    stored = " ".join(str(value) for value in row.__dict__.values())
    assert token not in stored and cookie not in stored
    assert row.start_token_hash == service.secret_hash(token)


async def test_an_expired_altered_or_unknown_token_opens_nothing(database: Database) -> None:
    with clock.freeze() as frozen:
        url = await new_url(database, new_customer_id(), lifetime=timedelta(seconds=60))
        token = token_of(url.url)
        altered = token[:-1] + ("A" if token[-1] != "A" else "B")
        for wrong in (altered, "", None, token + "x", "é" * 43):
            with pytest.raises(AppError) as refused:
                await start(database, wrong)  # type: ignore[arg-type]
            assert refused.value.code is ErrorCode.PORTAL_LINK_INVALID
        frozen.advance(timedelta(seconds=60))
        with pytest.raises(AppError) as late:
            await start(database, token)
        assert late.value.code is ErrorCode.PORTAL_LINK_EXPIRED


async def test_the_cookie_opens_its_session_until_it_expires_or_is_signed_out_of(
    database: Database,
) -> None:
    with clock.freeze() as frozen:
        first = await new_url(database, new_customer_id(), lifetime=timedelta(minutes=10))
        second = await new_url(database, new_customer_id(), lifetime=timedelta(minutes=10))
        cookie, _ = await start(database, token_of(first.url))
        other_cookie, other = await start(database, token_of(second.url))

        async def held(value: str | None) -> service.OpenSession | None:
            async with database.read_session() as session:
                return await service.session_of_cookie(session, cookie=value, now=clock.now())

        assert await held(cookie) is not None
        assert await held(None) is None
        assert await held(cookie[:-1] + ("A" if cookie[-1] != "A" else "B")) is None
        async with database.session() as session:
            await service.end_session(session, session_id=other.id, now=clock.now())
            await session.commit()
        assert await held(other_cookie) is None
        frozen.advance(timedelta(minutes=10) - timedelta(milliseconds=1))
        assert await held(cookie) is not None
        frozen.advance(timedelta(milliseconds=1))
        assert await held(cookie) is None


async def test_a_session_lasts_from_a_minute_to_a_day(database: Database) -> None:
    for lifetime in (timedelta(seconds=59), timedelta(days=1, seconds=1)):
        with pytest.raises(ValueError, match="60 seconds to 24 hours"):
            await new_url(database, new_customer_id(), lifetime=lifetime)


async def test_pruning_deletes_expired_sessions_only(empty_database: Database) -> None:
    with clock.freeze() as frozen:
        await new_url(empty_database, new_customer_id(), lifetime=timedelta(minutes=1))
        await new_url(empty_database, new_customer_id(), lifetime=timedelta(minutes=5))
        frozen.advance(timedelta(minutes=2))
        async with empty_database.session() as session:
            assert await service.prune_sessions(session, now=clock.now()) == 1
            await session.commit()
        async with empty_database.read_session() as session:
            left = (await session.execute(select(PortalSession))).scalars().all()
    assert [row.expires_at - row.created_at for row in left] == [timedelta(minutes=5)]
