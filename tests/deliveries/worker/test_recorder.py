"""How the worker records outcomes while the database cannot take them: an outcome dropped is
an attempt missing from the history and a second send once its lease runs out."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from tests.support.deliveries import eventually, pix_outbound, publish, register
from tests.support.receivers import Receiver, failing_then_ok
from tests.support.service import Merchant
from tests.support.settings import make_settings
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue.backend import Claim, ClaimedDelivery, Outcome
from tucano.deliveries.worker import loop, recorder
from tucano.deliveries.worker.loop import DeliveryWorker


def outcome(event_id: str = "evt_1") -> Outcome:
    now = clock.now()
    claimed = ClaimedDelivery(
        delivery_id=1,
        claim_token="token",
        event_id=event_id,
        event_type="PIX_OUTBOUND",
        customer_id=7,
        webhook_id=3,
        attempt=1,
        payload=b"{}",
        lease_until=now + timedelta(minutes=1),
        event_created_at=now,
        target_url=None,
        webhook_active=False,
        subscribed_to=None,
        signing_secrets=(),
    )
    return Outcome(
        claimed=claimed,
        status=ResultStatus.SUCCESS,
        target_url="https://hooks.example.com/x",
        http_status=200,
        response_body="",
        error_message=None,
        duration_ms=1,
        attempted_at=now,
        next_attempt_at=None,
    )


UNUSED_URL = "sqlite+aiosqlite:///unused.db"


class FlakyQueue:
    """A queue whose record fails `failures` times with `error`, then records; it claims
    nothing and gives back at once."""

    def __init__(self, failures: int = 0, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ConnectionError("connection refused")
        self.calls = 0
        self.tried = asyncio.Event()
        self.recorded: list[Outcome] = []
        self.claims: list[int] = []

    async def record(self, outcomes: Sequence[Outcome]) -> None:
        self.calls += 1
        self.tried.set()
        if self.calls <= self.failures:
            raise self.error
        self.recorded += outcomes

    async def claim(self, *, limit: int, **_: Any) -> Claim:
        self.claims.append(limit)
        return Claim([], more_due=False)

    async def release(self, claims: Any, **_: Any) -> list[ClaimedDelivery]:
        return []

    async def serve(self, stop: asyncio.Event, due: asyncio.Event) -> None:
        pass

    async def close(self) -> None:
        pass


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "RECORD_RETRY_PAUSES", (0.001, 0.002))
    monkeypatch.setattr(recorder, "RECORD_AT_STOP_SECONDS", 0.05)


def new_worker(queue: Any = None) -> DeliveryWorker:
    settings = make_settings(UNUSED_URL)
    return DeliveryWorker(Database(settings.database_url), settings, queue=queue or FlakyQueue())


async def test_outcomes_wait_out_a_database_outage_of_any_length(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    # Far more failures than the 8 tries (about 21 s) that used to drop the batch.
    flaky = FlakyQueue(50, ConnectionError("connection refused"))
    with capture_logs() as logs:
        await new_worker(flaky).recorder.record([outcome()], stopping=asyncio.Event())
    assert len(flaky.recorded) == 1 and flaky.calls == 51
    assert [e["event"] for e in logs].count("delivery_record_failed") == 50
    assert logs[-1]["event"] == "delivery_record_resumed"
    assert "delivery_outcomes_unrecorded" not in [e["event"] for e in logs]


async def test_at_shutdown_outcomes_are_given_up_after_a_bound_and_said_so(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    flaky = FlakyQueue(10**9, ConnectionError("connection refused"))
    stopping = asyncio.Event()
    stopping.set()
    with capture_logs() as logs:
        await asyncio.wait_for(
            new_worker(flaky).recorder.record([outcome("evt_9")], stopping=stopping), 5
        )
    assert flaky.recorded == []
    (unrecorded,) = [e for e in logs if e["event"] == "delivery_outcomes_unrecorded"]
    assert unrecorded["batch"] == 1 and unrecorded["eventIds"] == ["evt_9"]


async def test_a_batch_the_database_refuses_for_a_fault_is_not_retried_for_ever(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    """A fault, not an outage (say a value the table refuses): it would fail the same way each
    time, and hold every later outcome behind it."""
    flaky = FlakyQueue(10**9, ValueError("not a valid row"))
    with capture_logs() as logs:
        await asyncio.wait_for(
            new_worker(flaky).recorder.record([outcome()], stopping=asyncio.Event()), 5
        )
    assert flaky.calls == recorder.RECORD_FAULT_RETRIES
    assert logs[-1]["event"] == "delivery_outcomes_unrecorded"


async def test_claims_are_given_back_again_after_a_lost_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What is not given back waits out its lease unsent (the fault audit saw such give-backs
    fail on connections an administrator had ended)."""
    calls = []

    async def release(claims: Any, **kwargs: Any) -> list[Any]:
        calls.append(claims)
        if len(calls) == 1:
            raise ConnectionError("connection was closed in the middle of operation")
        return []

    queue = FlakyQueue()
    monkeypatch.setattr(queue, "release", release)
    monkeypatch.setattr(loop, "RELEASE_RETRY_PAUSES", (0.001, 0.001))
    held = [outcome().claimed]
    await new_worker(queue)._release(held, due_in=timedelta(0))
    assert calls == [held, held]


async def test_no_claims_while_outcomes_wait_for_the_database(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    """Once the database is back, a claim that came before the record could take this worker's
    own deliveries again (their lease run out meanwhile) and send them a second time."""
    flaky = FlakyQueue(10**9, ConnectionError("connection refused"))
    claims = flaky.claims
    delivery_worker = new_worker(flaky)
    writing = asyncio.create_task(
        delivery_worker.recorder.record([outcome()], stopping=asyncio.Event())
    )
    try:
        await flaky.tried.wait()
        await asyncio.sleep(0.05)  # the failure seen: retried every 2 ms meanwhile
        assert delivery_worker.recorder.unrecorded
        await delivery_worker._claim(10)
        assert claims == []
        flaky.failures = 0  # the database is back
        await asyncio.wait_for(writing, 5)
    finally:
        writing.cancel()
    await delivery_worker._claim(10)
    assert claims == [10] and len(flaky.recorded) == 1


async def test_the_allowance_at_shutdown_is_one_for_all_batches(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    flaky = FlakyQueue(10**9, ConnectionError("connection refused"))
    monkeypatch.setattr(recorder, "RECORD_AT_STOP_SECONDS", 0.3)
    stopping = asyncio.Event()
    stopping.set()
    delivery_worker = new_worker(flaky)
    started = asyncio.get_running_loop().time()
    with capture_logs() as logs:
        for batch in range(4):
            await delivery_worker.recorder.record([outcome(f"evt_{batch}")], stopping=stopping)
    assert asyncio.get_running_loop().time() - started < 0.6  # not 4 x 0.3 s
    unrecorded = [e for e in logs if e["event"] == "delivery_outcomes_unrecorded"]
    assert [e["eventIds"] for e in unrecorded] == [[f"evt_{b}"] for b in range(4)]


async def test_claims_wait_until_every_outcome_queued_meanwhile_is_recorded(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    """Outcomes that came while a batch waited for the database may be of deliveries whose
    lease ran out during the outage too: claims wait for them as well."""
    flaky = FlakyQueue(2, ConnectionError("connection refused"))
    delivery_worker = new_worker(flaky)
    record = flaky.record

    async def record_while_more_come(outcomes: Sequence[Outcome]) -> None:
        if flaky.calls == 0:
            delivery_worker.recorder.outcomes.append(outcome("evt_b"))  # finished meanwhile
        await record(outcomes)

    monkeypatch.setattr(flaky, "record", record_while_more_come)
    await delivery_worker.recorder.record([outcome("evt_a")], stopping=asyncio.Event())
    assert delivery_worker.recorder.unrecorded
    queued = delivery_worker.recorder.outcomes[:]
    delivery_worker.recorder.outcomes.clear()
    await delivery_worker.recorder.record(queued, stopping=asyncio.Event())
    assert not delivery_worker.recorder.unrecorded
    assert [o.claimed.event_id for o in flaky.recorded] == ["evt_a", "evt_b"]


async def test_a_worker_gated_by_unrecorded_outcomes_still_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The claim loop must wait while claims are held back, not spin: a spinning loop starved
    the recorder that would have released it, and the stop itself."""
    delivery_worker = new_worker()
    delivery_worker.recorder.unrecorded = True
    delivery_worker._more_due = True  # the last claim was full
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, stop.set)
    await asyncio.wait_for(delivery_worker.run(stop), 10)


async def test_a_try_under_way_at_the_stop_is_given_up_with_the_allowance(
    monkeypatch: pytest.MonkeyPatch, quick_retries: None
) -> None:
    """A database that hangs rather than refuses: the try began before the stop."""
    monkeypatch.setattr(recorder, "RECORD_AT_STOP_SECONDS", 0.2)

    async def hang(outcomes: Any) -> None:
        await asyncio.sleep(60)

    queue = FlakyQueue()
    monkeypatch.setattr(queue, "record", hang)
    stopping = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, stopping.set)
    with capture_logs() as logs:
        await asyncio.wait_for(new_worker(queue).recorder.record([outcome()], stopping=stopping), 2)
    assert logs[-1]["event"] == "delivery_outcomes_unrecorded"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_the_workers_attempts_are_counted_by_outcome_and_its_successes_timed(
    merchant: Merchant, publisher: Merchant, receiver: Receiver
) -> None:
    successes = sample("tucano_delivery_attempts_total", outcome="success")
    retries = sample("tucano_delivery_attempts_total", outcome="pending_retry")
    timed = sample("tucano_delivery_latency_seconds_count")
    receiver.behaviours["/metered"] = failing_then_ok(1)
    await register(merchant, receiver, "/metered")
    await publish(publisher, merchant.customer_id, pix_outbound())
    await receiver.wait_for("/metered", 2)

    async def counted() -> bool:
        return sample("tucano_delivery_attempts_total", outcome="success") >= successes + 1

    await eventually(counted, what="the success counted")
    assert sample("tucano_delivery_attempts_total", outcome="pending_retry") >= retries + 1
    assert sample("tucano_delivery_latency_seconds_count") >= timed + 1
