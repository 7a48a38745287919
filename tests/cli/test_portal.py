"""`tucano portal url`: one URL on stdout, of the customer's portal, that opens one session."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.processes import clean_env, run_tucano
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.portal import service


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("portal-cli")
    assert run_tucano("migrate", cwd=directory).returncode == 0
    return directory


async def test_the_url_opens_the_customers_portal_once(migrated: Path) -> None:
    env = clean_env(TUCANO_PUBLIC_URL="https://pay.example.com")
    before = clock.now()
    made = run_tucano(
        "portal", "url", "--customer-id", "42", "--read-only", "--ttl", "15m", "--locale", "en",
        cwd=migrated, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (url,) = made.stdout.splitlines()
    assert url.startswith("https://pay.example.com/portal/start?token=")
    assert "opens once, until " in made.stderr
    database = Database(f"sqlite+aiosqlite:///{migrated / 'tucano.db'}")
    try:
        async with database.session() as session:
            _, opened = await service.start_session(
                session, token=parse_qs(urlsplit(url).query)["token"][0], now=clock.now()
            )
            await session.commit()
    finally:
        await database.dispose()
    assert (opened.customer_id, opened.read_only, opened.locale) == (42, True, "en")
    lasts = opened.expires_at - before
    assert timedelta(minutes=15) <= lasts < timedelta(minutes=15, seconds=30)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--ttl", "59s"], "--ttl must be from 60s to 24h, not 59s"),
        (["--ttl", "25h"], "--ttl must be from 60s to 24h, not 25h"),
        (["--ttl", "soon"], "--ttl: 'soon' is not a duration"),
        (["--locale", "fr"], "--locale must be one of pt-BR, en, not 'fr'"),
    ],
)
def test_a_bad_option_is_one_line_and_no_url(
    migrated: Path, options: list[str], message: str
) -> None:
    refused = run_tucano("portal", "url", "--customer-id", "42", *options, cwd=migrated)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.strip().startswith(f"tucano: {message}"), refused.stderr
