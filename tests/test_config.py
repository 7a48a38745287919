from __future__ import annotations

import ipaddress
import re
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.config import ConfigurationError, Environment, load_settings
from tucano.setting_values import parse_duration, secret_key_weakness


@pytest.fixture(autouse=True)
def _isolated(no_env: None, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]


def test_defaults() -> None:
    settings = load_settings()
    assert settings.database_url == "sqlite+aiosqlite:///./tucano.db"
    assert settings.environment is Environment.SANDBOX
    assert settings.secret_key is None
    assert settings.webhook_allowed_networks == []
    assert settings.sandbox_autopay_delay_seconds == 30
    assert settings.retry_schedule == [
        timedelta(seconds=5),
        timedelta(minutes=5),
        timedelta(minutes=30),
        timedelta(hours=2),
        timedelta(hours=5),
        timedelta(hours=10),
        timedelta(hours=10),
    ]
    # decisions.md, "Limits and abuse"; counted in the process.
    assert settings.rate_limit == "100/second"
    assert settings.token_rate_limit == "10/second"
    assert settings.card_refusals_per_address == "10/hour"
    assert settings.card_refusals_per_card == "5/hour"
    assert settings.redis_url is None


def test_variables_and_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUCANO_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8, ::1/128")
    monkeypatch.setenv("TUCANO_RETRY_SCHEDULE", "1s,250ms,2m")
    monkeypatch.setenv("TUCANO_DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("TUCANO_PUBLIC_URL", "https://pay.example.com/")
    settings = load_settings()
    assert settings.webhook_allowed_networks == [
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    ]
    assert settings.retry_schedule == [
        timedelta(seconds=1),
        timedelta(milliseconds=250),
        timedelta(minutes=2),
    ]
    assert settings.database_url == "postgresql+asyncpg://u@h/db"
    assert settings.public_url == "https://pay.example.com"


def test_dotenv_is_read(tmp_path: object) -> None:
    from pathlib import Path

    Path(".env").write_text("TUCANO_SANDBOX_AUTOPAY_DELAY_SECONDS=2\n")
    assert load_settings().sandbox_autopay_delay_seconds == 2


def test_a_dotenv_that_is_not_utf8_is_one_clear_line(tmp_path: object) -> None:
    from pathlib import Path

    Path(".env").write_bytes(b"TUCANO_LOG_LEVEL=\xff\xfe\n")
    with pytest.raises(ConfigurationError, match=r"^\.env: not UTF-8 text"):
        load_settings()


def test_production_needs_the_secret_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    with pytest.raises(ConfigurationError, match="TUCANO_SECRET_KEY"):
        load_settings()
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    assert load_settings().environment is Environment.PRODUCTION


STRONG_KEY = "kM3vQ9zR1xT7bW5nY2cF8hJ4pL6sD0gA"


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("k" * 40, "has fewer than 8 distinct characters"),
        ("ab" * 20, "has fewer than 8 distinct characters"),
        ("Senha123" * 4, "repeats its first 8 characters"),
        ("Tucano-2026!" * 3, "repeats its first 12 characters"),
        ("0123456789ABCDEFGHIJKLMNOPQRSTUV", "is half or more one run of characters"),
        ("Wq9!Xk2Lp" + "z" * 30, "is half or more one run of characters"),
        ("zyxwvutsrqponmlkjihgfedcba-Xk29QpL7", "is half or more one run of characters"),
        ("test-secret-key-" + "x" * 32, "is half or more one run of characters"),
    ],
)
def test_production_refuses_a_weak_secret_key_saying_why(
    monkeypatch: pytest.MonkeyPatch, key: str, why: str
) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", key)
    with pytest.raises(ConfigurationError, match=f"^TUCANO_SECRET_KEY {why}") as refused:
        load_settings()
    assert key not in str(refused.value)
    # The sandbox takes any key of 32 characters: weak keys there sign nothing of value.
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "sandbox")
    assert load_settings().secret_key is not None


def test_production_needs_32_bytes_of_key() -> None:
    assert secret_key_weakness("kM3vQ9zR1xT7bW5nY2cF8hJ4pL6sD0g") == "is shorter than 32 bytes"
    assert secret_key_weakness(STRONG_KEY) is None
    # Bytes, not characters: 16 letters of two bytes each are enough.
    assert secret_key_weakness("çãéíóúâêôàüñÇÃÉÍ") is None


@pytest.mark.parametrize(
    "key",
    [
        STRONG_KEY,
        "correct horse battery staple, 2026",
        "3f9a1c7e5b2d4086a9e1c3b5d7f90246",  # secrets.token_hex(16)
        "q2V8tZ-Lr0wXb6Nf_Yh4Jc1Km9Ps3Dg7Ea5Uo-Ti",  # secrets.token_urlsafe(30)
    ],
)
def test_production_takes_a_random_looking_key(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", key)
    assert load_settings().secret_key is not None


@given(piece=st.text(min_size=1, max_size=20), times=st.integers(2, 40))
def test_a_piece_repeated_is_never_a_production_key(piece: str, times: int) -> None:
    assert secret_key_weakness(piece * times) is not None
    assert secret_key_weakness(piece * times + piece[: len(piece) // 2]) is not None


@given(
    key=st.text(alphabet=st.characters(codec="utf-8"), max_size=7).flatmap(
        lambda chars: st.text(alphabet=chars or "a", min_size=32, max_size=64)
    )
)
def test_a_key_of_few_characters_is_never_a_production_key(key: str) -> None:
    assert secret_key_weakness(key) is not None


@pytest.mark.parametrize(
    "url", ["http://pay.example.com", "HTTP://pay.example.com/base", "http://10.0.0.5:8000"]
)
def test_production_refuses_a_public_url_that_is_not_https(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    monkeypatch.setenv("TUCANO_PUBLIC_URL", url)
    with pytest.raises(
        ConfigurationError,
        match=r"^TUCANO_PUBLIC_URL must be an https URL when TUCANO_ENVIRONMENT=production",
    ):
        load_settings()
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "sandbox")
    assert load_settings().public_url == url


@pytest.mark.parametrize(
    "url",
    [
        "https://pay.example.com",
        "HTTPS://pay.example.com/tucano",
        "http://127.0.0.1:8000",
        "http://127.8.9.10",
        "http://localhost:8000",
        "http://api.localhost",
        "http://[::1]:8000",
    ],
)
def test_production_takes_https_or_a_loopback_host(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    monkeypatch.setenv("TUCANO_PUBLIC_URL", url)
    assert load_settings().public_url == url


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TUCANO_ENVIRONMENT", "staging"),
        ("TUCANO_WEBHOOK_ALLOWED_NETWORKS", "not-a-cidr"),
        ("TUCANO_RETRY_SCHEDULE", "soon"),
        ("TUCANO_DATABASE_URL", "mysql://x"),
        ("TUCANO_SECRET_KEY", "short"),
        ("TUCANO_PUBLIC_URL", "pay.example.com"),
        # A lease shorter than two attempts' timeout could run out while an attempt is open.
        ("TUCANO_DELIVERY_LEASE_SECONDS", "20"),
        # Each of these raised an error pydantic does not catch (a traceback at start).
        ("TUCANO_LOG_LEVEL", "LOUD"),
        ("TUCANO_RETRY_SCHEDULE", "99999999999d"),
        ("TUCANO_RESULT_RETENTION", "99999999999d"),
        ("TUCANO_DATABASE_URL", "postgresql+asyncpg://u:p@127.0.0.1:notaport/db"),
        # Accepted, each crashed or switched something off later: every value in seconds is
        # finite and at most 3650 days, and periods are longer than zero.
        ("TUCANO_SANDBOX_AUTOPAY_DELAY_SECONDS", "inf"),
        ("TUCANO_SANDBOX_AUTOPAY_DELAY_SECONDS", "1e12"),
        ("TUCANO_RETRY_AFTER_MAX_SECONDS", "1e300"),
        ("TUCANO_DELIVERY_POLL_INTERVAL_SECONDS", "inf"),
        ("TUCANO_MAINTENANCE_INTERVAL_SECONDS", "nan"),
        ("TUCANO_DNS_TIMEOUT_SECONDS", "inf"),
        ("TUCANO_DELIVERY_SLOW_AFTER_SECONDS", "inf"),
        ("TUCANO_RESULT_RETENTION", "0s"),
        ("TUCANO_RETRY_SCHEDULE", "5s,0s"),
        ("TUCANO_WEBHOOK_DEACTIVATE_AFTER", "0"),
        # Each connection would open a database of its own.
        ("TUCANO_DATABASE_URL", "sqlite+aiosqlite:///"),
        ("TUCANO_DATABASE_URL", "sqlite+aiosqlite:///:memory:"),
        ("TUCANO_PUBLIC_URL", "https://x y"),
        ("TUCANO_PUBLIC_URL", "https://pay.example.com/?a=1"),
        ("TUCANO_PUBLIC_URL", "https://:"),
        ("TUCANO_PUBLIC_URL", "https://<script>"),
        ("TUCANO_PUBLIC_URL", 'https://pay.example.com/"><x'),
        ("TUCANO_PUBLIC_URL", "https://pay.example.com:99999"),
        ("TUCANO_DATABASE_URL", "sqlite+aiosqlite:///file::memory:?uri=true"),
        ("TUCANO_DATABASE_URL", "sqlite+aiosqlite:///x.db?mode=MEMORY&uri=true"),
        ("TUCANO_DATABASE_URL", "sqlite+aiosqlite:///x.db?mode=memory&mode=ro&uri=true"),
        ("TUCANO_DATABASE_URL", "postgresql://u:p@h/d\udcff"),  # a byte that is not UTF-8
    ],
)
def test_bad_values_name_their_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=variable):
        load_settings()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "notacidr",
            "TUCANO_WEBHOOK_ALLOWED_NETWORKS: 'notacidr' is not a network such as 127.0.0.0/8",
        ),
        (
            "10.1.2.3/8",
            "TUCANO_WEBHOOK_ALLOWED_NETWORKS: '10.1.2.3/8' has host bits set; did you "
            "mean 10.0.0.0/8?",
        ),
    ],
)
def test_a_bad_network_is_shown_with_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("TUCANO_WEBHOOK_ALLOWED_NETWORKS", f"127.0.0.0/8, {value}")
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TUCANO_RATE_LIMIT", "lots"),
        ("TUCANO_RATE_LIMIT", "0/second"),
        ("TUCANO_RATE_LIMIT", "100/second;1000/hour"),
        ("TUCANO_TOKEN_RATE_LIMIT", "10/fortnight"),
        ("TUCANO_CARD_REFUSALS_PER_ADDRESS", "0/hour"),
        ("TUCANO_CARD_REFUSALS_PER_CARD", "5/hour,50/day"),
        ("TUCANO_REDIS_URL", "http://127.0.0.1:6379"),
        ("TUCANO_REDIS_KEY_PREFIX", "a prefix with spaces"),
    ],
)
def test_bad_rate_limit_settings_name_their_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=variable):
        load_settings()


def test_rates_as_limits_writes_them_and_an_empty_redis_url_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUCANO_RATE_LIMIT", " 6000 per minute ")
    monkeypatch.setenv("TUCANO_TOKEN_RATE_LIMIT", "5/2 seconds")
    monkeypatch.setenv("TUCANO_REDIS_URL", "")
    settings = load_settings()
    assert (settings.rate_limit, settings.token_rate_limit) == ("6000 per minute", "5/2 seconds")
    assert settings.redis_url is None
    monkeypatch.setenv("TUCANO_REDIS_URL", "redis://:pw@127.0.0.1:6379/2")
    assert "pw" not in repr(load_settings())


def test_public_urls_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    for url, kept in [
        ("HTTPS://Pay.Example.com/base/", "HTTPS://Pay.Example.com/base"),
        ("https://pagamentos.café.example/ção", "https://pagamentos.café.example/ção"),
        ("http://[::1]:8000/x", "http://[::1]:8000/x"),
    ]:
        monkeypatch.setenv("TUCANO_PUBLIC_URL", url)
        assert load_settings().public_url == kept


def test_log_level_and_environment_are_read_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUCANO_LOG_LEVEL", "debug")
    assert load_settings().log_level == "DEBUG"
    monkeypatch.setenv("TUCANO_ENVIRONMENT", " Sandbox ")
    assert load_settings().environment is Environment.SANDBOX


def test_libpq_sslmode_is_asyncpgs_ssl(monkeypatch: pytest.MonkeyPatch) -> None:
    # The form providers hand out; asyncpg refuses `sslmode` as an unknown argument.
    monkeypatch.setenv(
        "TUCANO_DATABASE_URL", "postgresql://app:pw@db.example.com:6543/pay?sslmode=require"
    )
    assert (
        load_settings().database_url
        == "postgresql+asyncpg://app:pw@db.example.com:6543/pay?ssl=require"
    )


def test_durations() -> None:
    assert parse_duration("90") == timedelta(seconds=90)
    assert parse_duration("5d") == timedelta(days=5)
    with pytest.raises(ValueError, match="duration"):
        parse_duration("5 weeks")


def test_previous_secret_keys_are_a_list_of_long_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUCANO_PREVIOUS_SECRET_KEYS", f" {'a' * 32} , {'b' * 40} ")
    keys = load_settings().previous_secret_keys
    assert [key.get_secret_value() for key in keys] == ["a" * 32, "b" * 40]
    assert "a" * 32 not in repr(load_settings())  # kept out of logs and tracebacks
    monkeypatch.setenv("TUCANO_PREVIOUS_SECRET_KEYS", f"{'a' * 32},short")
    with pytest.raises(ConfigurationError, match="TUCANO_PREVIOUS_SECRET_KEYS"):
        load_settings()
    # A key with commas or edge spaces, which TUCANO_SECRET_KEY may hold: as a JSON array.
    odd = " with, commas and spaces at both ends, 40+ chars "
    monkeypatch.setenv("TUCANO_PREVIOUS_SECRET_KEYS", f'["{odd}", "{"c" * 32}"]')
    keys = load_settings().previous_secret_keys
    assert [key.get_secret_value() for key in keys] == [odd, "c" * 32]
    monkeypatch.setenv("TUCANO_PREVIOUS_SECRET_KEYS", f'["{"f" * 32}", 5]')
    with pytest.raises(ConfigurationError, match="JSON array of strings"):
        load_settings()
    # Not written as an array: a comma-separated list, as before JSON was read.
    bracketed = "[" + "d" * 40
    monkeypatch.setenv("TUCANO_PREVIOUS_SECRET_KEYS", f"{bracketed},{'e' * 32}")
    keys = load_settings().previous_secret_keys
    assert [key.get_secret_value() for key in keys] == [bracketed, "e" * 32]


def test_the_previous_key_may_be_given_as_tucano_secret_key_previous(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUCANO_SECRET_KEY_PREVIOUS", "p" * 40)
    assert [key.get_secret_value() for key in load_settings().previous_secret_keys] == ["p" * 40]
    monkeypatch.setenv("TUCANO_SECRET_KEY_PREVIOUS", "short")
    with pytest.raises(ConfigurationError, match="at least 32"):
        load_settings()


@pytest.mark.parametrize(
    ("networks", "reaches"),
    [
        ("0.0.0.0/0", "loopback addresses"),
        ("10.0.0.0/8,127.0.0.0/8", "loopback addresses"),
        ("169.254.169.254/32", "link-local addresses (cloud metadata)"),
        ("::/0", "the loopback address"),
        ("fe80::/64", "link-local addresses"),
        ("0.0.0.0/32", "the unspecified address"),
    ],
)
def test_production_refuses_allowed_networks_that_reach_loopback_link_local_or_unspecified(
    monkeypatch: pytest.MonkeyPatch, networks: str, reaches: str
) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    monkeypatch.setenv("TUCANO_WEBHOOK_ALLOWED_NETWORKS", networks)
    with pytest.raises(ConfigurationError, match=re.escape(f"contains {reaches}")):
        load_settings()
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "sandbox")
    assert load_settings().webhook_allowed_networks


def test_production_takes_private_ranges_for_its_receivers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    monkeypatch.setenv("TUCANO_WEBHOOK_ALLOWED_NETWORKS", "10.0.0.0/8,192.168.0.0/16,fd00::/8")
    assert [str(n) for n in load_settings().webhook_allowed_networks] == [
        "10.0.0.0/8",
        "192.168.0.0/16",
        "fd00::/8",
    ]


@pytest.mark.parametrize(
    "token", ["a" * 16, "abcdabcdabcdabcdabcdabcdabcdabcd", "0123456789abcdef"]
)
def test_production_refuses_a_weak_metrics_token(
    monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    monkeypatch.setenv("TUCANO_METRICS_TOKEN", token)
    with pytest.raises(ConfigurationError, match=r"^TUCANO_METRICS_TOKEN "):
        load_settings()
    monkeypatch.setenv("TUCANO_METRICS_TOKEN", STRONG_KEY[::-1])
    assert load_settings().metrics_token is not None


def test_the_portal_may_be_framed_by_no_one_unless_origins_are_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().portal_frame_ancestors == "'none'"
    monkeypatch.setenv(
        "TUCANO_PORTAL_FRAME_ANCESTORS",
        "  https://Dash.Example.com/  'self'\thttps://*.example.org:8443 https://dash.example.com",
    )
    assert load_settings().portal_frame_ancestors == (
        "https://dash.example.com 'self' https://*.example.org:8443"
    )
    monkeypatch.setenv("TUCANO_PORTAL_FRAME_ANCESTORS", "")
    assert load_settings().portal_frame_ancestors == "'none'"


@pytest.mark.parametrize(
    "value",
    [
        "*",
        "https:",
        "dash.example.com",
        "https://dash.example.com/admin",
        "https://dash.example.com 'none'",
        "https://dash.example.com;script-src *",
        "https://dash.example.com:99999",
        "javascript://x",
        "'unsafe-inline'",
    ],
)
def test_frame_ancestors_that_are_not_origins_stop_the_start(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("TUCANO_PORTAL_FRAME_ANCESTORS", value)
    with pytest.raises(ConfigurationError, match=r"^TUCANO_PORTAL_FRAME_ANCESTORS: "):
        load_settings()


def test_production_frames_the_portal_only_in_https_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", STRONG_KEY)
    monkeypatch.setenv("TUCANO_PUBLIC_URL", "https://pay.example.com")
    monkeypatch.setenv("TUCANO_PORTAL_FRAME_ANCESTORS", "https://dash.example.com")
    assert load_settings().portal_frame_ancestors == "https://dash.example.com"
    monkeypatch.setenv("TUCANO_PORTAL_FRAME_ANCESTORS", "http://dash.example.com")
    with pytest.raises(ConfigurationError, match="must be https"):
        load_settings()
    monkeypatch.setenv("TUCANO_PORTAL_FRAME_ANCESTORS", "http://localhost:3000")
    assert load_settings().portal_frame_ancestors == "http://localhost:3000"


def test_the_queue_is_the_database_unless_nats_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().queue == "database"
    monkeypatch.setenv("TUCANO_QUEUE", "nats")
    monkeypatch.setenv("TUCANO_NATS_URL", "nats://10.0.0.1:4222,nats://10.0.0.2:4222")
    with pytest.raises(ConfigurationError, match="TUCANO_QUEUE=nats keeps its record in Postgre"):
        load_settings()  # the default database is SQLite
    monkeypatch.setenv("TUCANO_DATABASE_URL", "postgresql+asyncpg://tucano@db.internal/tucano")
    settings = load_settings()
    assert (settings.queue, settings.nats_url) == (
        "nats",
        "nats://10.0.0.1:4222,nats://10.0.0.2:4222",
    )
    monkeypatch.setenv("TUCANO_NATS_STREAM", "TUCANO DELIVERIES")
    with pytest.raises(ConfigurationError, match="TUCANO_NATS_STREAM"):
        load_settings()
    monkeypatch.setenv("TUCANO_NATS_STREAM", "TUCANO_STAGING")
    assert load_settings().nats_stream == "TUCANO_STAGING"
    monkeypatch.setenv("TUCANO_QUEUE", "redis")
    with pytest.raises(ConfigurationError, match="TUCANO_QUEUE"):
        load_settings()
