"""The payment-link interface's scopes, on each database."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.support.payment_links import (
    BASE,
    create,
    listing,
    new_link,
    post_link,
    tx,
    window,
)
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode


async def test_scopes_are_enforced(service: RunningService) -> None:
    reader = await service.merchant(scopes=[Scope.PAYMENT_LINK_READ])
    assert_error_body(await post_link(reader, new_link()), 403, ErrorCode.INSUFFICIENT_SCOPE)
    assert (
        await reader.get(f"{BASE}/link-payment", params=window(), headers=tx())
    ).status_code == 200
    writer_only = await service.merchant(scopes=[Scope.PAYMENT_LINK_WRITE])
    response = await writer_only.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert_error_body(response, 403, ErrorCode.INSUFFICIENT_SCOPE)
    anonymous = await service.http.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert_error_body(anonymous, 401, ErrorCode.UNAUTHENTICATED)


async def test_details_answer_the_link(merchant: Merchant) -> None:
    created = await create(merchant)
    response = await merchant.get(f"{BASE}/{created['linkPaymentUuid']}", headers=tx())
    assert response.status_code == 200
    assert response.json() == created


@pytest.mark.parametrize(
    "bad",
    [
        "not-a-uuid",
        "123",
        "00000000-0000-0000-0000-00000000000g",
        "db58d49ae486419fb905233df3dd61eb",
        "urn:uuid:db58d49a-e486-419f-b905-233df3dd61eb",
    ],
)
async def test_a_bad_uuid_is_a_400(merchant: Merchant, bad: str) -> None:
    error = assert_error_body(await merchant.get(f"{BASE}/{bad}", headers=tx()), 400)
    assert error["errors"][0].startswith("linkPaymentUuid must be a UUID")


async def test_another_customers_link_is_answered_like_a_missing_one(
    service: RunningService,
) -> None:
    owner, stranger = await service.merchant(), await service.merchant()
    theirs = (await create(owner))["linkPaymentUuid"]
    foreign = await stranger.get(f"{BASE}/{theirs}", headers=tx())
    missing = await stranger.get(f"{BASE}/{uuid.uuid4()}", headers=tx())
    a = assert_error_body(foreign, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)
    b = assert_error_body(missing, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)
    assert (a["message"], a["errors"]) == (b["message"], b["errors"])
    assert (await listing(stranger))["totalElements"] == 0
    report = (await stranger.get(f"{BASE}/report", params=window(), headers=tx())).json()
    assert report["totalCount"] == 0


async def test_reads_at_once_each_answer_their_own_link_and_only_to_its_owner(
    service: RunningService,
) -> None:
    # Concurrent reads share statements on PostgreSQL (db.CoalescedLookup): each must still get
    # its own link, and a stranger's read in the same batch nothing.
    owner, stranger = await service.merchant(), await service.merchant()
    links = [await create(owner, amount=Decimal(f"{10 + i}.00")) for i in range(12)]
    reads = [(owner, link) for link in links] * 3 + [(stranger, link) for link in links]
    answers = await asyncio.gather(
        *(reader.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx()) for reader, link in reads)
    )
    for (reader, link), answer in zip(reads, answers, strict=True):
        if reader is owner:
            assert answer.status_code == 200, answer.text
            assert answer.json() == link
        else:
            assert_error_body(answer, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)


async def test_a_link_expires_exactly_at_its_expiration_date(service: RunningService) -> None:
    start = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
    with clock.freeze(start) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, expirationDays=2)
        path = f"{BASE}/{link['linkPaymentUuid']}"
        frozen.advance(timedelta(days=2) - timedelta(milliseconds=1))
        merchant = await service.merchant(customer_id=merchant.customer_id)
        assert (await merchant.get(path, headers=tx())).json()["status"] == {
            "code": 1,
            "description": "CREATED",
        }
        frozen.advance(timedelta(milliseconds=1))
        assert (await merchant.get(path, headers=tx())).json()["status"] == {
            "code": 3,
            "description": "EXPIRED",
        }
        assert (await listing(merchant, status="EXPIRED"))["totalElements"] == 1
        assert (await listing(merchant, status="CREATED"))["totalElements"] == 0
