"""Card testing across links, over HTTP on each database: refused card attempts per source
address and per card number, whatever the link, counted in the process or in a shared Redis."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import redis.asyncio

from tests.support.payer import APPROVED_VISA, DECLINED, Payer, alert_of
from tests.support.payment_links import create
from tests.support.service import RunningService, assert_error_body, serving
from tests.support.settings import REDIS_URL, TEST_SECRET_KEY, make_settings, redis_settings
from tucano.auth.tokens import derive_key
from tucano.checkout.card_budgets import KEY_PURPOSE
from tucano.checkout.card_processor import (
    Approved,
    CardAuthorization,
    Refused,
    SandboxCardProcessor,
)
from tucano.core.errors import ErrorCode
from tucano.db.database import Database

# decisions.md's figures, which the suite's own servers raise (tests/support/settings.py).
PER_ADDRESS, PER_CARD = 10, 5
ATTACKER = "203.0.113.66"
CARD_LIMITED = "Este cartão foi recusado muitas vezes na última hora"
ADDRESS_LIMITED = "Muitos pagamentos com cartão foram recusados a partir desta conexão"

# The last four digits of every card the processor of the running test was asked about.
ASKED: list[str] = []
# How long the processor takes to answer, for attempts that must be in flight together.
ANSWER_AFTER: list[float] = [0.0]


class CountingProcessor(SandboxCardProcessor):
    """The sandbox's processor, noting each card it is asked to authorize."""

    async def authorize(self, authorization: CardAuthorization) -> Approved | Refused:
        ASKED.append(authorization.card.last4)
        await asyncio.sleep(ANSWER_AFTER[0])
        return await super().authorize(authorization)


def counting_processor(settings: Any) -> CountingProcessor:
    return CountingProcessor()


def declined_card(n: int) -> str:
    """A valid Visa number that is no test card: the sandbox declines it."""
    body = f"400000{n:09d}"
    total = 0
    for i, digit in enumerate(reversed(body)):
        d = int(digit) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


@asynccontextmanager
async def checkout_service(
    database_url: str, database: Database, **overrides: Any
) -> AsyncIterator[RunningService]:
    ASKED.clear()
    settings = make_settings(
        database_url,
        card_processor="tests.checkout.test_card_budgets:counting_processor",
        card_refusals_per_address=f"{PER_ADDRESS}/hour",
        card_refusals_per_card=f"{PER_CARD}/hour",
        **overrides,
    )
    async with serving(settings, database) as service:
        yield service


@asynccontextmanager
async def payer_from(
    service: RunningService, link: dict[str, Any], address: str
) -> AsyncIterator[Payer]:
    # The test server, like `tucano serve`, takes the address a proxy on 127.0.0.1 names.
    payer = Payer(service, link)
    payer.headers["x-forwarded-for"] = address
    try:
        yield payer
    finally:
        await payer.close()


def assert_limited(answer: httpx.Response, says: str) -> None:
    assert answer.status_code == 429, answer.text
    assert says in (alert_of(answer.text) or ""), alert_of(answer.text)
    # Whole seconds, rounded up: at most the hour and the second it began in.
    assert 1 <= int(answer.headers["retry-after"]) <= 3601
    assert "data-card-form" in answer.text  # the page, with its form, PIX still offered
    assert "(horário de Brasília)" in (alert_of(answer.text) or "")


async def test_one_declined_card_on_six_links_reaches_the_processor_five_times(
    database_url: str, database: Database
) -> None:
    async with checkout_service(database_url, database) as service:
        merchant = await service.merchant()
        statuses = []
        for _ in range(6):
            link = await create(merchant)
            async with payer_from(service, link, ATTACKER) as payer:
                for _ in range(5):
                    answer = await payer.pay_by_card(DECLINED)
                    statuses.append(answer.status_code)
                    if len(statuses) > PER_CARD:
                        assert_limited(answer, CARD_LIMITED)
        assert statuses == [402] * PER_CARD + [429] * (30 - PER_CARD)
        assert ASKED == ["0002"] * PER_CARD


@pytest.mark.parametrize("storage", ["process", "redis"])
async def test_many_declined_cards_from_one_address_reach_the_processor_ten_times(
    database_url: str, database: Database, storage: str
) -> None:
    shared = redis_settings() if storage == "redis" else {}
    async with checkout_service(database_url, database, **shared) as service:
        merchant = await service.merchant()
        links = [await create(merchant) for _ in range(6)]
        statuses = []
        for index, link in enumerate(links):
            async with payer_from(service, link, ATTACKER) as payer:
                for attempt in range(5):
                    answer = await payer.pay_by_card(declined_card(index * 5 + attempt))
                    statuses.append(answer.status_code)
                    if len(statuses) > PER_ADDRESS:
                        assert_limited(answer, ADDRESS_LIMITED)
        assert statuses == [402] * PER_ADDRESS + [429] * (30 - PER_ADDRESS)
        assert len(ASKED) == PER_ADDRESS
        # The address is held even for a card that would be approved.
        async with payer_from(service, links[2], ATTACKER) as payer:
            assert_limited(await payer.pay_by_card(APPROVED_VISA), ADDRESS_LIMITED)
        assert len(ASKED) == PER_ADDRESS
        # A payer elsewhere pays the same link.
        async with payer_from(service, links[2], "198.51.100.20") as payer:
            assert (await payer.pay_by_card(APPROVED_VISA)).status_code == 303
        assert ASKED[-1] == "4242"


async def test_attempts_sent_at_once_from_one_address_do_not_all_reach_the_processor(
    database_url: str, database: Database
) -> None:
    async with checkout_service(database_url, database) as service:
        merchant = await service.merchant()
        payers = [Payer(service, await create(merchant)) for _ in range(PER_ADDRESS + 6)]
        try:
            pages = []
            for payer in payers:
                payer.headers["x-forwarded-for"] = ATTACKER
                pages.append(await payer.page())
            ANSWER_AFTER[0] = 0.3  # every attempt is still waiting when the last is sent
            answers = await asyncio.gather(
                *(
                    payer.pay_by_card(declined_card(100 + index), page=page)
                    for index, (payer, page) in enumerate(zip(payers, pages, strict=True))
                )
            )
        finally:
            ANSWER_AFTER[0] = 0.0
            for payer in payers:
                await payer.close()
        assert sorted(answer.status_code for answer in answers) == [402] * PER_ADDRESS + [429] * 6
        assert len(ASKED) == PER_ADDRESS


@pytest.mark.parametrize("storage", ["process", "redis"])
async def test_one_card_from_many_addresses_is_refused_after_five_across_links(
    database_url: str, database: Database, storage: str
) -> None:
    shared = redis_settings() if storage == "redis" else {}
    async with checkout_service(database_url, database, **shared) as service:
        merchant = await service.merchant()
        statuses = []
        for index in range(8):
            link = await create(merchant)
            async with payer_from(service, link, f"192.0.2.{index + 1}") as payer:
                answer = await payer.pay_by_card(DECLINED, security_code=f"{index + 1}11")
                statuses.append(answer.status_code)
                if index >= PER_CARD:
                    assert_limited(answer, CARD_LIMITED)
                    payer.headers["accept"] = "application/json"
                    body = assert_error_body(
                        await payer.pay_by_card(DECLINED), 429, ErrorCode.RATE_LIMITED
                    )
                    assert body["errors"] == [
                        "too many refused card attempts with this card; see Retry-After"
                    ]
        assert statuses == [402] * PER_CARD + [429] * (8 - PER_CARD)
        assert ASKED == ["0002"] * PER_CARD
        # Another card, from another address, still goes through.
        async with payer_from(service, await create(merchant), "198.51.100.30") as payer:
            assert (await payer.pay_by_card(APPROVED_VISA)).status_code == 303
        # Approvals are no refusals: the same approved card pays link after link.
        for index in range(PER_CARD + 1):
            async with payer_from(service, await create(merchant), "198.51.100.31") as payer:
                assert (await payer.pay_by_card(APPROVED_VISA)).status_code == 303, index


async def test_two_instances_sharing_a_redis_share_the_card_budget_and_keep_no_card_number(
    database_url: str, database: Database, capfd: pytest.CaptureFixture[str]
) -> None:
    shared = redis_settings()
    async with (
        checkout_service(database_url, database, **shared) as one,
        checkout_service(database_url, database, **shared) as other,
    ):
        ASKED.clear()
        merchant = await one.merchant()
        statuses = []
        for index in range(PER_CARD + 1):
            service = (one, other)[index % 2]
            async with payer_from(service, await create(merchant), f"192.0.2.{index + 1}") as p:
                statuses.append((await p.pay_by_card(DECLINED, security_code="731")).status_code)
        assert statuses == [402] * PER_CARD + [429]
        assert len(ASKED) == PER_CARD
        # The store holds the card's keyed hash, with an expiry; never its number.
        number = DECLINED.replace(" ", "")
        keyed = hmac.new(
            derive_key(TEST_SECRET_KEY.encode(), KEY_PURPOSE), number.encode(), hashlib.sha256
        ).hexdigest()
        client = redis.asyncio.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            keys = [str(k) async for k in client.scan_iter(f"{shared['redis_key_prefix']}*")]
            counted = [key for key in keys if "/card/" in key]
            assert counted and all(keyed in key for key in counted), keys
            for key in keys:
                assert number not in key and number[-8:] not in key
                assert number not in str(await client.get(key))
            for key in counted:  # the window's, and the one before it: two hours at most
                assert 0 < await client.ttl(key) <= 2 * 3600
        finally:
            await client.aclose()
    logs = capfd.readouterr()
    written = logs.out + logs.err
    assert "card_attempts_over_budget" in written
    assert number not in written and "4000 0000" not in written and keyed not in written
