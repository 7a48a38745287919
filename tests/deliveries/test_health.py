"""A webhook's delivery health (last success, failing run) as batches of attempts are recorded in
any order, and the automatic deactivation that reads it."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from tests.support.service import new_customer_id
from tests.support.settings import TEST_SECRET_STORE
from tucano.core.clock import clock
from tucano.db.database import Database
from tucano.db.engines import connect_asyncpg
from tucano.deliveries.health import DeliveryHealth
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue import queue_for
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.webhooks import service as webhooks
from tucano.webhooks.changes import WEBHOOK_CHANNEL, WebhookChange, webhook_changes
from tucano.webhooks.models import Webhook

T0 = datetime(2032, 1, 10, 10, 0, tzinfo=UTC)

# An attempt: (seconds after T0 it started, whether it succeeded).
attempts = st.lists(st.tuples(st.integers(0, 50), st.booleans()), min_size=1, max_size=12)


async def _record(
    database: Database, recorded: list[tuple[int, bool]], bounds: list[int]
) -> tuple[datetime | None, datetime | None]:
    """(last success, failing since) of a new webhook once `recorded` is recorded in batches cut
    at `bounds`, by the rule as the database runs it."""
    webhook_id = await _webhook(database)
    for start, end in itertools.pairwise(bounds):
        batch = recorded[start:end]
        succeeded = [T0 + timedelta(seconds=s) for s, ok in batch if ok]
        failed = tuple(T0 + timedelta(seconds=s) for s, ok in batch if not ok)
        health = DeliveryHealth(webhook_id, max(succeeded, default=None), failed)
        await queue_for(database).record_health([health])
    async with database.session() as session:
        stored = await session.get(Webhook, webhook_id)
    assert stored is not None
    return stored.last_success_at, stored.failing_since


@given(attempts=attempts, cuts=st.lists(st.integers(0, 12), max_size=4), data=st.data())
async def test_a_failing_run_never_starts_before_the_first_failure_after_the_last_success(
    database: Database, attempts: list[tuple[int, bool]], cuts: list[int], data: st.DataObject
) -> None:
    recorded = data.draw(st.permutations(attempts))  # as they finish, not as they started
    bounds = sorted({0, len(recorded), *(min(c, len(recorded)) for c in cuts)})
    last_success, failing_since = await _record(database, recorded, bounds)
    # The definition: the latest success, and the first failure that started after it.
    latest = max((T0 + timedelta(seconds=s) for s, ok in attempts if ok), default=None)
    after = [
        T0 + timedelta(seconds=s)
        for s, ok in attempts
        if not ok and (latest is None or T0 + timedelta(seconds=s) > latest)
    ]
    assert last_success == latest
    if not after:
        assert failing_since is None
    else:
        # Never earlier than the definition (a working webhook is never switched off early).
        # Later only when a success was recorded after failures that started after it: the run
        # then counts from the next failure.
        assert failing_since is None or failing_since >= min(after)
        assert failing_since is None or any(failing_since == f for f in after)
    in_start_order = sorted(attempts)
    assert (await _record(database, in_start_order, bounds))[1] == (min(after) if after else None)


async def _webhook(database: Database, **fields: object) -> int:
    async with database.session() as session:
        hook = Webhook(
            customer_id=new_customer_id(),
            partner_id=None,
            target_url="https://example.com/h",
            event_type="PIX_OUTBOUND",
            is_active=True,
            secret="",
            created_at=T0,
            updated_at=T0,
            **fields,
        )
        session.add(hook)
        await session.flush()
        # Sealed as the service stores it, so other tests on this database can read every row.
        TEST_SECRET_STORE.seal(hook, secret=webhooks.new_signing_secret(), previous_secrets=None)
        await session.commit()
        return hook.id


def _outcome(webhook_id: int, status: ResultStatus, at: datetime, n: int) -> Outcome:
    claimed = ClaimedDelivery(
        delivery_id=9_000_000 + n,
        claim_token="token",
        event_id=f"evt_health{n}",
        event_type="PIX_OUTBOUND",
        customer_id=1,
        webhook_id=webhook_id,
        attempt=1,
        payload=b"{}",
        lease_until=at,
        event_created_at=at,
        target_url=None,
        webhook_active=False,
        subscribed_to=None,
        signing_secrets=(),
    )
    failed = status != ResultStatus.SUCCESS
    return Outcome(
        claimed=claimed,
        status=status,
        target_url="https://example.com/h",
        http_status=500 if failed else 200,
        response_body="",
        error_message="receiver answered HTTP 500" if failed else None,
        duration_ms=10,
        attempted_at=at,
        next_attempt_at=None,
    )


async def test_an_older_failure_recorded_after_a_success_does_not_switch_a_webhook_off(
    database: Database,
) -> None:
    webhook_id = await _webhook(database)
    # A slow attempt starts at T0 and fails 14 s later; a quick one starts at T0 + 1 s and
    # succeeds at once. The success is recorded first.
    success = _outcome(webhook_id, ResultStatus.SUCCESS, T0 + timedelta(seconds=1), 1)
    with clock.freeze(T0 + timedelta(seconds=2)):
        await queue_for(database).record([success])
    with clock.freeze(T0 + timedelta(seconds=15)):
        await queue_for(database).record([_outcome(webhook_id, ResultStatus.EXHAUSTED, T0, 2)])
    async with database.session() as session:
        switched_off = await webhooks.deactivate_failing_webhooks(
            session, failing_for=timedelta(days=5), now=T0 + timedelta(days=5, seconds=1)
        )
        await session.commit()
        stored = await session.get(Webhook, webhook_id)
    assert webhook_id not in switched_off
    assert stored is not None and stored.is_active and stored.failing_since is None


async def test_a_success_recorded_as_the_deactivation_runs_keeps_the_webhook_on(
    private_database: Database,
) -> None:
    """(A database of its own: another test's service could run the job first and switch the
    failing webhook off before this job starts.)"""
    database = private_database
    if database.dialect != "postgresql":
        pytest.skip("PostgreSQL: SQLite's write lock puts the job and every writer in turn")
    now = clock.now()
    webhook_id = await _webhook(database, failing_since=now - timedelta(days=6))
    async with database.session() as job:
        execute = job.execute

        async def success_first(statement: object, *args: object, **kwargs: object) -> object:
            # A worker records a success (its own statement, committed) just before the job
            # writes: the job must see it.
            health = [DeliveryHealth(webhook_id, clock.now(), ())]
            await queue_for(database).record_health(health)
            return await execute(statement, *args, **kwargs)  # type: ignore[arg-type]

        job.execute = success_first  # type: ignore[method-assign,assignment]
        switched_off = await webhooks.deactivate_failing_webhooks(
            job, failing_for=timedelta(days=5), now=now
        )
        await job.commit()
    async with database.session() as session:
        stored = await session.get(Webhook, webhook_id)
    assert switched_off == []
    assert stored is not None and stored.is_active and stored.failing_since is None


async def test_webhooks_switched_off_together_are_each_announced_to_workers(
    private_database: Database,
) -> None:
    """Workers drop what they hold for a webhook that changed: one switched off with others in
    a run of the job is announced like one switched off alone, here and (PostgreSQL) to other
    processes. (A database of its own: another test's service could run the job first.)"""
    database = private_database
    now = clock.now()
    ours = {await _webhook(database, failing_since=now - timedelta(days=6)) for _ in range(3)}
    heard_here: list[WebhookChange | None] = []
    webhook_changes.listen(heard_here.append)
    listener = None
    heard_there: list[str] = []
    if database.dialect == "postgresql":
        listener = await connect_asyncpg(database.url)
        await listener.add_listener(WEBHOOK_CHANNEL, lambda *args: heard_there.append(args[3]))
    try:
        async with database.session() as session:
            switched_off = await webhooks.deactivate_failing_webhooks(
                session, failing_for=timedelta(days=5), now=now
            )
            # Not before the commit.
            assert not [c for c in heard_here if c is not None and c.webhook_id in ours]
            await session.commit()
        assert ours <= set(switched_off)
        assert ours <= {c.webhook_id for c in heard_here if c is not None and not c.deleted}
        if listener is not None:
            for _ in range(50):
                if ours <= {int(p.split(":")[0]) for p in heard_there}:
                    break
                await asyncio.sleep(0.05)
            assert {f"{webhook_id}:changed" for webhook_id in ours} <= set(heard_there)
    finally:
        webhook_changes.forget(heard_here.append)
        if listener is not None:
            await listener.close()


async def test_health_lost_to_an_outage_after_the_attempts_were_recorded_is_one_warning_line(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = queue_for(database)

    async def database_gone(*_args: object) -> None:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(queue, "record_health", database_gone)
    webhook_id = await _webhook(database)
    with capture_logs() as logs, clock.freeze(T0 + timedelta(seconds=2)):
        await queue.record(
            [_outcome(webhook_id, ResultStatus.SUCCESS, T0 + timedelta(seconds=1), 3)]
        )
    failed = [entry for entry in logs if entry["event"] == "delivery_health_update_failed"]
    assert len(failed) == 1
    assert failed[0]["log_level"] == "warning"
    assert "exc_info" not in failed[0]
    assert "connection refused" in failed[0]["error"]
