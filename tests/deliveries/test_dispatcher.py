"""The worker's dispatcher and bookkeeping: hosts in turn, a cap per host, slow hosts, changes
missed, a clean close. No database."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import make_settings
from tucano.clock import clock
from tucano.db import Database
from tucano.deliveries import queue
from tucano.deliveries.queue import Claim, ClaimedDelivery
from tucano.deliveries.wakeup import WebhookChange
from tucano.deliveries.worker import PREFETCH, SLOW_ATTEMPTS_PER_SENDER, DeliveryWorker, _Dispatcher
from tucano.webhooks.service import DeliveryTarget

_ids = itertools.count(1)


def claimed(url: str, webhook_id: int = 1, *, lease: float = 60) -> ClaimedDelivery:
    return ClaimedDelivery(
        delivery_id=next(_ids),
        claim_token="t",
        event_id="evt_x",
        event_type="PIX_OUTBOUND",
        customer_id=1,
        webhook_id=webhook_id,
        attempt=1,
        payload=b"{}",
        target=DeliveryTarget(webhook_id, url, True, ("whsec_x",), "PIX_OUTBOUND"),
        lease_until=clock.now() + timedelta(seconds=lease),
    )


def add(dispatcher: _Dispatcher, url: str, count: int, webhook_id: int = 1) -> None:
    for _ in range(count):
        dispatcher.add(claimed(url, webhook_id), url)


async def test_hosts_take_turns_and_each_is_capped() -> None:
    dispatcher = _Dispatcher(per_target=2)
    add(dispatcher, "https://a.example/x", 5, webhook_id=1)
    add(dispatcher, "https://b.example/y", 5, webhook_id=2)
    handed = [await dispatcher.next() for _ in range(4)]
    hosts = [target.key for _, target in (h for h in handed if h is not None)]
    # One of each in turn, and no more than two of a host at once.
    assert hosts == ["https://a.example", "https://b.example"] * 2
    assert dispatcher.running == 4 and dispatcher.waiting == 6

    # Both hosts are at their cap: a fifth sender waits until one of them finishes.
    fifth = asyncio.ensure_future(dispatcher.next())
    await asyncio.sleep(0.01)
    assert not fifth.done()
    first = handed[0]
    assert first is not None
    dispatcher.done(first[1], quick=True)
    got = await asyncio.wait_for(fifth, 1)
    assert got is not None and got[1].key == "https://a.example"


async def test_paths_of_one_host_share_its_cap() -> None:
    dispatcher = _Dispatcher(per_target=1)
    add(dispatcher, "https://a.example/one", 1, webhook_id=1)
    add(dispatcher, "HTTPS://A.EXAMPLE/two", 1, webhook_id=2)
    assert await dispatcher.next() is not None
    assert dispatcher.running == 1 and dispatcher.waiting == 1
    waiting = asyncio.ensure_future(dispatcher.next())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    (target,) = dispatcher.targets.values()
    assert target.webhook_ids == {1, 2}
    waiting.cancel()


async def test_close_hands_back_what_was_not_started_and_wakes_idle_senders() -> None:
    dispatcher = _Dispatcher(per_target=1)
    add(dispatcher, "https://a.example/x", 3)
    started = await dispatcher.next()
    assert started is not None
    idle = asyncio.ensure_future(dispatcher.next())
    await asyncio.sleep(0.01)

    given_back = dispatcher.take_waiting()
    assert len(given_back) == 2
    dispatcher.close()
    assert await asyncio.wait_for(idle, 1) is None
    assert await dispatcher.next() is None
    # The delivery in flight still finishes, and then the host is forgotten.
    dispatcher.done(started[1], quick=True)
    assert dispatcher.targets == {} and dispatcher.running == 0 and dispatcher.waiting == 0


async def test_a_slow_host_is_counted_apart_until_one_of_its_attempts_is_quick() -> None:
    dispatcher = _Dispatcher(per_target=2)
    add(dispatcher, "https://hangs.example/x", 5, webhook_id=1)
    add(dispatcher, "https://fine.example/y", 3, webhook_id=2)
    handed = [await dispatcher.next() for _ in range(4)]
    hanging = [h for h in handed if h is not None and h[1].key == "https://hangs.example"]
    assert len(hanging) == 2
    target = hanging[0][1]
    dispatcher.mark_slow(target)
    # What is held for it (2 in flight, 3 waiting) is the slow hosts' share; the other's is not.
    assert dispatcher.held_for_slow_targets() == 5

    dispatcher.done(target, quick=False)  # another slow attempt: still slow
    assert target.slow and dispatcher.held_for_slow_targets() == 4
    dispatcher.done(target, quick=True)  # a quick one: no longer slow
    assert not target.slow and dispatcher.held_for_slow_targets() == 0


async def test_a_slow_host_with_nothing_left_is_forgotten() -> None:
    dispatcher = _Dispatcher(per_target=2)
    add(dispatcher, "https://hangs.example/x", 1)
    handed = await dispatcher.next()
    assert handed is not None
    dispatcher.mark_slow(handed[1])
    dispatcher.done(handed[1], quick=False)
    assert dispatcher.targets == {} and dispatcher.slow == set()
    assert dispatcher.held_for_slow_targets() == 0


async def test_what_is_held_for_slow_hosts_leaves_the_worker_room_to_claim() -> None:
    settings = make_settings(
        "sqlite+aiosqlite:///unused.db", delivery_concurrency=4, delivery_concurrency_per_target=2
    )
    worker = DeliveryWorker(Database(settings.database_url), settings)
    dispatcher = worker._dispatcher
    full = PREFETCH * 4
    add(dispatcher, "https://hangs.example/x", full)
    assert worker._room() == 0  # the whole prefetch is held for one host
    handed = await dispatcher.next()
    assert handed is not None
    dispatcher.mark_slow(handed[1])
    assert worker._room() == full
    # Still bounded: everything held, slow or not, stays within its own limit.
    add(dispatcher, "https://hangs.example/x", SLOW_ATTEMPTS_PER_SENDER * 4)
    assert worker._room() == 0


async def test_changes_missed_give_back_every_delivery_held_but_not_started() -> None:
    settings = make_settings("sqlite+aiosqlite:///unused.db")
    worker = DeliveryWorker(Database(settings.database_url), settings)
    dispatcher = worker._dispatcher
    add(dispatcher, "https://a.example/x", 3, webhook_id=1)
    add(dispatcher, "https://b.example/y", 2, webhook_id=2)
    started = await dispatcher.next()
    assert started is not None

    worker._on_webhook_change(None)

    # The four not started go back to the queue, to be claimed with the webhooks as they are
    # now; the one under way finishes.
    assert dispatcher.waiting == 0 and dispatcher.running == 1
    assert len(worker._stale) == 4 and started[0] not in worker._stale


async def test_a_delivery_given_back_after_its_webhook_was_deleted_gets_its_last_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held as stale (its webhook had just changed) when the webhook was deleted: the deletion
    # left its record to this worker, which hears it is cancelled from the give-back.
    settings = make_settings("sqlite+aiosqlite:///unused.db")
    worker = DeliveryWorker(Database(settings.database_url), settings)
    cancelled, kept = claimed("https://a.example/x", 1), claimed("https://a.example/x", 1)
    worker._stale = [cancelled, kept]

    async def release(_database: Any, claims: Any, **_kwargs: Any) -> list[ClaimedDelivery]:
        assert claims == [cancelled, kept]
        return [cancelled]

    monkeypatch.setattr(queue, "release_claims", release)
    await worker._give_back_stale()

    (outcome,) = worker._outcomes
    assert outcome.claimed == cancelled and outcome.status == "FAILED"
    assert outcome.error_message == "not sent: the webhook was deleted; this delivery is cancelled"
    assert outcome.next_attempt_at is None and worker._stale == []


def test_a_deleted_webhooks_deliveries_are_recorded_at_once_only_under_this_workers_lease() -> None:
    # A worker paused past its lease hears of the deletion late: the deletion may have recorded
    # those whose lease had run out itself, so they are given back, and the give-back says
    # whether they are still this worker's to record.
    settings = make_settings("sqlite+aiosqlite:///unused.db")
    worker = DeliveryWorker(Database(settings.database_url), settings)
    held = claimed("https://a.example/x", 7)
    ran_out = claimed("https://a.example/x", 7, lease=-1)
    worker._dispatcher.add(held, "https://a.example/x")
    worker._dispatcher.add(ran_out, "https://a.example/x")

    worker._on_webhook_change(WebhookChange(7, True))

    assert [o.claimed for o in worker._outcomes] == [held]
    assert worker._dispatcher.waiting == 0 and worker._stale == [ran_out]


async def test_a_claim_under_way_when_changes_were_missed_is_given_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = make_settings("sqlite+aiosqlite:///unused.db")
    worker = DeliveryWorker(Database(settings.database_url), settings)
    rows = [claimed("https://a.example/x") for _ in range(3)]

    async def claim_while_the_listener_reconnects(*_args: Any, **_kwargs: Any) -> Claim:
        worker._on_webhook_change(None)  # the rows below were read before it
        return Claim(rows, more_due=False)

    monkeypatch.setattr(queue, "claim_due_deliveries", claim_while_the_listener_reconnects)
    await worker._claim(10)
    assert worker._dispatcher.waiting == 0 and worker._stale == rows

    # A claim that starts afterwards keeps what it took.
    async def claim_later(*_args: Any, **_kwargs: Any) -> Claim:
        return Claim(rows, more_due=False)

    monkeypatch.setattr(queue, "claim_due_deliveries", claim_later)
    await worker._claim(10)
    assert worker._dispatcher.waiting == 3


async def test_failed_claims_pause_longer_each_time_and_log_one_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from structlog.testing import capture_logs

    settings = make_settings("sqlite+aiosqlite:///unused.db")
    worker = DeliveryWorker(Database(settings.database_url), settings)
    attempts = 0
    database_up = False

    async def claim(*_args: Any, **_kwargs: Any) -> Claim:
        nonlocal attempts
        attempts += 1
        if not database_up:
            raise OSError("connection refused")
        return Claim([], more_due=False)

    monkeypatch.setattr(queue, "claim_due_deliveries", claim)
    with capture_logs() as logs:
        now = 1000.0
        monkeypatch.setattr("tucano.deliveries.worker.time.monotonic", lambda: now)
        await worker._claim(10)
        await worker._claim(10)  # at once: paused, the database is not asked
        assert attempts == 1
        pauses = []
        for _ in range(6):
            now = worker._claims_paused_until
            await worker._claim(10)
            pauses.append(worker._claims_paused_until - now)
        assert attempts == 7
        assert pauses == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]  # doubling from 0.5 s, up to 8 s
        database_up = True
        now = worker._claims_paused_until
        await worker._claim(10)
        now += 0.01
        await worker._claim(10)  # back to normal: no pause
    assert attempts == 9
    failed = [line for line in logs if line["event"] == "delivery_claim_failed"]
    assert len(failed) == 7
    assert failed[0]["log_level"] == "error" and failed[0].get("exc_info")
    assert all(line["log_level"] == "warning" and "exc_info" not in line for line in failed[1:])
    assert failed[-1]["error"] == "OSError: connection refused"
    assert [
        line["failuresInARow"] for line in logs if line["event"] == "delivery_claims_resumed"
    ] == [7]
