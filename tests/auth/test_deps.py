"""auth.deps: the caller of a request, and its API client's rate limit (TUCANO_RATE_LIMIT),
checked before any database work."""

from __future__ import annotations

import httpx
from fastapi.routing import APIRoute

from tests.support.processes import free_port
from tests.support.service import Merchant, NoDatabase, assert_error_body, serving
from tests.support.settings import make_settings, redis_settings
from tucano.api.deps import get_read_session, get_session
from tucano.auth.deps import RequireScope
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.deliveries.router import router as deliveries
from tucano.deliveries.router import webhook_deletion
from tucano.ingest.router import router as events
from tucano.payment_links.router import router as payment_links
from tucano.webhooks.router import router as webhooks

LIST = "/webhook/v1/list"


async def spend(merchant: Merchant, times: int) -> list[httpx.Response]:
    return [await merchant.get(LIST) for _ in range(times)]


async def test_a_client_over_its_limit_gets_429_with_retry_after_and_the_error_body(
    database_url: str, database: Database
) -> None:
    async with serving(make_settings(database_url, rate_limit="5/second"), database) as service:
        merchant = await service.merchant()
        answers = await spend(merchant, 12)
        assert [a.status_code for a in answers[:10]] == [200] * 10  # a burst of twice 5
        refused = next(a for a in answers if a.status_code == 429)
        body = assert_error_body(refused, 429, ErrorCode.RATE_LIMITED)
        assert body["message"] == "Too many requests"
        assert "retry after" in body["errors"][0]
        assert 1 <= int(refused.headers["retry-after"]) <= 2


async def test_a_client_over_its_limit_costs_no_database_work(
    database_url: str, database: Database
) -> None:
    # A minute's budget: a window that rolled over mid-test would let a request through.
    async with serving(make_settings(database_url, rate_limit="2/minute"), database) as service:
        merchant = await service.merchant()
        while (await merchant.get(LIST)).status_code != 429:
            pass
        service.app.state.database = NoDatabase()
        try:
            for path in (LIST, "/webhook/v1/1", "/payment-link/v1/list"):
                assert_error_body(await merchant.get(path), 429, ErrorCode.RATE_LIMITED)
        finally:
            service.app.state.database = database


async def test_separate_clients_do_not_share_a_budget_and_tokens_of_one_do(
    database_url: str, database: Database
) -> None:
    async with serving(make_settings(database_url, rate_limit="2/second"), database) as service:
        client_id, secret, customer_id = await service.client_credentials()
        first = Merchant(service, customer_id, await service.token_of(client_id, secret))
        same_client = Merchant(service, customer_id, await service.token_of(client_id, secret))
        other = await service.merchant()
        while (await first.get(LIST)).status_code != 429:
            pass
        assert_error_body(await same_client.get(LIST), 429, ErrorCode.RATE_LIMITED)
        assert (await other.get(LIST)).status_code == 200


async def test_two_instances_sharing_a_redis_share_a_clients_budget(
    database_url: str, database: Database
) -> None:
    settings = make_settings(database_url, rate_limit="3/second", **redis_settings())
    async with serving(settings, database) as one, serving(settings, database) as other:
        on_one = await one.merchant()
        on_other = Merchant(other, on_one.customer_id, on_one.token)
        statuses = []
        for _ in range(4):
            statuses += [(await on_one.get(LIST)).status_code]
            statuses += [(await on_other.get(LIST)).status_code]
        # Six of 3/second's burst in all: alone, neither instance would refuse its four.
        assert statuses[:6] == [200] * 6 and 429 in statuses[6:], statuses


async def test_with_redis_unreachable_the_service_answers_and_limits_per_process(
    database_url: str, database: Database
) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    settings = make_settings(database_url, rate_limit="2/second", redis_url=down)
    async with serving(settings, database) as service:
        merchant = await service.merchant()
        statuses = [answer.status_code for answer in await spend(merchant, 8)]
        assert statuses[:4] == [200] * 4 and statuses[-1] == 429, statuses


def test_every_operation_checks_the_caller_before_it_opens_a_session() -> None:
    checked = 0
    for router in (webhooks, deliveries, webhook_deletion, events, payment_links):
        for route in router.routes:
            assert isinstance(route, APIRoute)
            calls = [dependency.call for dependency in route.dependant.dependencies]
            sessions = [
                i for i, call in enumerate(calls) if call in (get_session, get_read_session)
            ]
            callers = [i for i, call in enumerate(calls) if isinstance(call, RequireScope)]
            assert callers, route.path  # every operation of these routers has an API client
            checked += 1
            assert not sessions or callers[0] < sessions[0], route.path
    assert checked > 10
