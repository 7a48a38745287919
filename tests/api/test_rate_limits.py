"""The request budgets of api.rate_limits: counted in the process, or shared through Redis."""

from __future__ import annotations

import pytest
from limits import parse
from structlog.testing import capture_logs

from tests.support.processes import free_port
from tests.support.settings import make_settings, redis_settings
from tucano.api.rate_limits import RateLimits, address_key, with_bursts
from tucano.config import Settings

# The budgets touch no database; settings need one named all the same.
NO_DATABASE = "sqlite+aiosqlite:///never-opened.db"


def limits_of(**overrides: object) -> RateLimits:
    return RateLimits(make_settings(NO_DATABASE, **overrides))


async def answers(check: object, key: str, times: int) -> list[int | None]:
    return [await check(key) for _ in range(times)]  # type: ignore[operator]


def test_bursts_are_twice_the_rate_over_twice_the_window() -> None:
    rate = with_bursts(parse("100/second"))
    assert (rate.amount, rate.get_expiry()) == (200, 2)
    hourly = with_bursts(parse("60/hour"))
    assert (hourly.amount, hourly.get_expiry()) == (120, 7200)


def test_the_defaults_are_those_of_decisions_md(no_env: None) -> None:
    limits = RateLimits(Settings(_env_file=None))  # type: ignore[call-arg]
    # 100/second with bursts of twice that; the token endpoint 10/second, without bursts.
    assert (limits.client_rate.amount, limits.client_rate.get_expiry()) == (200, 2)
    assert (limits.token_rate.amount, limits.token_rate.get_expiry()) == (10, 1)


async def test_a_client_gets_a_burst_of_twice_its_rate_then_a_retry_after() -> None:
    limits = limits_of(rate_limit="5/second")
    seen = await answers(limits.client_retry_after, "client-a", 12)
    assert seen[:10] == [None] * 10
    refused = [answer for answer in seen[10:] if answer is not None]
    assert refused, seen  # the 11th, or the 12th if a window began between them
    assert all(isinstance(answer, int) and 1 <= answer <= 2 for answer in refused)


async def test_separate_clients_do_not_share_a_budget() -> None:
    limits = limits_of(rate_limit="2/second")
    assert (await answers(limits.client_retry_after, "client-a", 8))[-1] is not None
    assert await limits.client_retry_after("client-b") is None


async def test_token_budgets_per_address_and_per_client_id_and_address_are_apart() -> None:
    limits = limits_of(token_rate_limit="3/second")
    assert (await answers(limits.token_address_retry_after, "203.0.113.5", 6))[-1] is not None
    assert await limits.token_address_retry_after("203.0.113.6") is None
    assert await limits.token_client_retry_after("tcl_x", "203.0.113.5") is None
    for _ in range(6):
        over = await limits.token_client_retry_after("tcl_x", "203.0.113.5")
    assert over is not None
    # The client_id alone is no budget: from another address it is counted apart.
    assert await limits.token_client_retry_after("tcl_x", "203.0.113.6") is None
    assert await limits.client_retry_after("tcl_x") is None  # the API budget is another


@pytest.mark.parametrize("storage", ["process", "redis"])
async def test_a_card_attempt_takes_its_place_first_and_gives_it_back_unless_refused(
    storage: str,
) -> None:
    shared = redis_settings() if storage == "redis" else {}
    limits = limits_of(
        card_refusals_per_address="3/hour", card_refusals_per_card="2/hour", **shared
    )
    try:
        for _ in range(5):  # attempts that were not refused, given back each time
            assert await limits.reserve_card_attempt("192.0.2.1", "card-a") is None
            await limits.release_card_attempt("192.0.2.1", "card-a")
        for _ in range(2):  # refused: kept
            assert await limits.reserve_card_attempt("192.0.2.1", "card-a") is None
        spent = await limits.reserve_card_attempt("192.0.2.1", "card-a")
        assert spent is not None and spent.budget == "card"
        assert 1 <= spent.retry_after <= 3600
        # The address's place that the spent card took is given back: one left, for another card.
        assert await limits.reserve_card_attempt("192.0.2.1", "card-b") is None
        spent = await limits.reserve_card_attempt("192.0.2.1", "card-c")
        assert spent is not None and spent.budget == "address"
        assert await limits.reserve_card_attempt("192.0.2.2", "card-c") is None
    finally:
        await limits.close()


def test_an_ipv6_host_counts_as_its_64_and_a_mapped_ipv4_as_itself() -> None:
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("::ffff:203.0.113.5") == address_key("203.0.113.5") == "203.0.113.5"
    assert address_key("testclient") == "testclient"


async def test_processes_sharing_a_redis_share_the_count() -> None:
    shared = {"rate_limit": "3/second", **redis_settings()}
    first, second = limits_of(**shared), limits_of(**shared)
    try:
        for limits in (first, second, first):
            assert await limits.client_retry_after("client-a") is None
            assert await limits.client_retry_after("client-a") is None
        # Six of six used, three through each: neither process would have refused alone.
        assert await second.client_retry_after("client-a") is not None
        assert await first.client_retry_after("client-b") is None
        alone = limits_of(rate_limit="3/second")
        assert await alone.client_retry_after("client-a") is None
    finally:
        await first.close()
        await second.close()


async def test_another_prefix_is_another_count_in_the_same_redis() -> None:
    one, other = limits_of(token_rate_limit="1/second", **redis_settings()), None
    try:
        assert (await answers(one.token_address_retry_after, "192.0.2.1", 3))[-1] is not None
        other = limits_of(token_rate_limit="1/second", **redis_settings())
        assert await other.token_address_retry_after("192.0.2.1") is None
    finally:
        await one.close()
        if other is not None:
            await other.close()


async def test_an_unreachable_redis_is_counted_in_the_process_with_one_warning() -> None:
    limits = limits_of(rate_limit="2/second", redis_url=f"redis://127.0.0.1:{free_port()}/0")
    try:
        with capture_logs() as logs:
            seen = await answers(limits.client_retry_after, "client-a", 8)
        assert seen[:4] == [None] * 4 and seen[-1] is not None  # still limited, if per process
        warnings = [line for line in logs if line["event"] == "rate_limit_redis_unreachable"]
        assert len(warnings) == 1, logs
        assert warnings[0]["log_level"] == "warning"
        assert "127.0.0.1" not in str(warnings[0])  # the URL (and any password) stays out
    finally:
        await limits.close()
