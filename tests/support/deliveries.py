"""Helpers for delivery tests: registering webhooks on a receiver, publishing events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from tests.support.receivers import Receiver
from tests.support.service import Merchant
from tucano.core import json_codec


async def register(
    merchant: Merchant,
    receiver: Receiver,
    path: str,
    event_type: str = "PIX_OUTBOUND",
    **extra: Any,
) -> dict[str, Any]:
    response = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": receiver.url(path), "eventType": event_type, **extra},
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def pix_outbound(amount: Decimal | int = Decimal("10.50"), **overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "transferId": "trf_123",
        "endToEndId": "E13935893202601151030A1B2C3D4E5F",
        "amount": amount,
        "receiver": {
            "documentNumber": "11222333000181",
            "name": "Fornecedor Ltda",
            "pixKey": None,
            "bankIspb": "00000000",
        },
        "status": "COMPLETED",
        "transferDate": "2026-01-15T10:30:00.000Z",
        "description": "Pagamento",
        "userReference": "order-1",
    }
    payload.update(overrides)
    return payload


async def publish(
    publisher: Merchant,
    customer_id: int,
    payload: dict[str, Any] | None = None,
    event_type: str = "PIX_OUTBOUND",
) -> dict[str, Any]:
    body = {
        "eventType": event_type,
        "customerId": customer_id,
        "payload": payload or pix_outbound(),
    }
    response = await publisher.post(
        "/internal/v1/events",
        content=json_codec.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 202, response.text
    return dict(response.json())


async def results(merchant: Merchant, **params: Any) -> dict[str, Any]:
    response = await merchant.get("/webhook/v1/list/results", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10, what: str = "condition"
) -> None:
    """Poll `check` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        await asyncio.sleep(0.05)


async def results_for(
    merchant: Merchant, count: int, timeout: float = 10, **params: Any
) -> list[dict[str, Any]]:
    """Wait until at least `count` result records match `params`; return them (newest first)."""
    found: list[dict[str, Any]] = []

    async def enough() -> bool:
        nonlocal found
        found = (await results(merchant, size=100, **params))["content"]
        return len(found) >= count

    await eventually(enough, timeout=timeout, what=f"{count} results for {params}")
    return found
