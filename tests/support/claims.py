"""Claimed deliveries made up for the worker's tests, with no database behind them."""

from __future__ import annotations

import itertools
from datetime import timedelta

from tucano.core.clock import clock
from tucano.deliveries.queue.backend import ClaimedDelivery
from tucano.deliveries.worker.dispatcher import Dispatcher

delivery_ids = itertools.count(1)


def claimed(url: str, webhook_id: int = 1, *, lease: float = 60) -> ClaimedDelivery:
    return ClaimedDelivery(
        delivery_id=next(delivery_ids),
        claim_token="t",
        event_id="evt_x",
        event_type="PIX_OUTBOUND",
        customer_id=1,
        webhook_id=webhook_id,
        attempt=1,
        payload=b"{}",
        lease_until=clock.now() + timedelta(seconds=lease),
        event_created_at=clock.now(),
        target_url=url,
        webhook_active=True,
        subscribed_to="PIX_OUTBOUND",
        signing_secrets=("whsec_x",),
    )


def add(dispatcher: Dispatcher, url: str, count: int, webhook_id: int = 1) -> None:
    for _ in range(count):
        dispatcher.add(claimed(url, webhook_id), url)
