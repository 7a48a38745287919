"""The worker's bookkeeping: room to claim beside slow hosts, webhook changes and changes missed,
give-backs, failed claims. No database."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.claims import add, claimed
from tests.support.settings import make_settings
from tucano.db.database import Database
from tucano.deliveries.queue.backend import Claim, ClaimedDelivery
from tucano.deliveries.worker.loop import PREFETCH, SLOW_ATTEMPTS_PER_SENDER, DeliveryWorker
from tucano.webhooks.changes import WebhookChange


async def test_what_is_held_for_slow_hosts_leaves_the_worker_room_to_claim() -> None:
    settings = make_settings(
        "sqlite+aiosqlite:///unused.db", delivery_concurrency=4, delivery_concurrency_per_target=2
    )
    worker = DeliveryWorker(Database(settings.database_url), settings)
    dispatcher = worker._dispatcher
    full = PREFETCH * 4
    add(dispatcher, "https://hangs.example/x", full)
    assert worker._room_to_claim() == 0  # the whole prefetch is held for one host
    handed = await dispatcher.next()
    assert handed is not None
    dispatcher.mark_slow(handed[1])
    assert worker._room_to_claim() == full
    # Still bounded: everything held, slow or not, stays within its own limit.
    add(dispatcher, "https://hangs.example/x", SLOW_ATTEMPTS_PER_SENDER * 4)
    assert worker._room_to_claim() == 0


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

    async def release(claims: Any, **_kwargs: Any) -> list[ClaimedDelivery]:
        assert claims == [cancelled, kept]
        return [cancelled]

    monkeypatch.setattr(worker.queue, "release", release)
    await worker._give_back_stale()

    (outcome,) = worker.recorder.outcomes
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

    assert [o.claimed for o in worker.recorder.outcomes] == [held]
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

    monkeypatch.setattr(worker.queue, "claim", claim_while_the_listener_reconnects)
    await worker._claim(10)
    assert worker._dispatcher.waiting == 0 and worker._stale == rows

    # A claim that starts afterwards keeps what it took.
    async def claim_later(*_args: Any, **_kwargs: Any) -> Claim:
        return Claim(rows, more_due=False)

    monkeypatch.setattr(worker.queue, "claim", claim_later)
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

    monkeypatch.setattr(worker.queue, "claim", claim)
    with capture_logs() as logs:
        now = 1000.0
        monkeypatch.setattr("tucano.deliveries.worker.loop.time.monotonic", lambda: now)
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
