"""The delivery worker: claim due deliveries, POST them with bounded concurrency, record outcomes.

    claim loop ──claims──▶ one task per delivery ──outcome──▶ queue ──batch──▶ recorder
        ▲                        │ per-target cap                            (one transaction
        └── wake-up / slot freed / poll                                       per batch)

No transaction is open while a POST is in flight. A claimed delivery carries a lease (its
`next_attempt_at` pushed ahead); a worker that dies simply lets its leases run out and another
worker claims them again, so an event may arrive twice but is never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import structlog

from tucano.clock import clock
from tucano.config import Settings
from tucano.db import Database
from tucano.deliveries import service
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.retry import next_attempt_delay
from tucano.deliveries.sender import USER_AGENT, Sender, SendResult
from tucano.deliveries.service import ClaimedDelivery, Outcome
from tucano.deliveries.wakeup import listen_for_notifications, wakeup
from tucano.webhooks.signing import delivery_headers

log = structlog.get_logger("tucano.deliveries")

RECORD_BATCH_MAX = 500
RECORD_LINGER_SECONDS = 0.02
SATURATED_RETRY_DELAY = timedelta(seconds=1)
PREFETCH = 4


@dataclass
class _Target:
    """One receiving host: deliveries being sent to it, and claimed ones waiting for a slot."""

    running: int = 0
    waiting: deque[ClaimedDelivery] = field(default_factory=deque)
    webhook_ids: set[int] = field(default_factory=set)


def _target_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class DeliveryWorker:
    def __init__(self, database: Database, settings: Settings, *, sender: Sender | None = None):
        self.database = database
        self.settings = settings
        self.sender = sender or Sender(
            allowed_networks=settings.webhook_allowed_networks,
            allow_http=settings.is_sandbox,
            timeout=settings.delivery_timeout_seconds,
            max_connections=settings.delivery_concurrency,
        )
        self.lease = timedelta(seconds=settings.delivery_lease_seconds)
        self._claim_batch = settings.delivery_concurrency
        self._rng = random.Random()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._targets: dict[str, _Target] = {}
        # Outcomes waiting to be recorded; None tells the recorder to finish and return.
        self._outcomes: asyncio.Queue[Outcome | None] = asyncio.Queue()
        self._attention = asyncio.Event()

    # --- main loop -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set, then finish what is in flight (releasing what cannot
        start) and record every outcome before returning."""
        # One event wakes the loop: new deliveries committed (wakeup), enough slots freed, stop.
        self._attention = wakeup.waiter()
        stopping = asyncio.create_task(self._attend_when_set(stop), name="delivery-stop")
        recorder = asyncio.create_task(self._record_outcomes_forever(), name="delivery-recorder")
        listener = None
        if self.database.dialect == "postgresql":
            listener = asyncio.create_task(
                listen_for_notifications(self.database.url, stop), name="delivery-listener"
            )
        log.info("delivery_worker_started", concurrency=self.settings.delivery_concurrency)
        try:
            while not stop.is_set():
                self._attention.clear()
                free = self._free_slots()
                # Claim in batches: with work in flight, wait until a good share of the slots
                # is free rather than run one claim transaction per finished delivery.
                if free >= self._claim_batch or (free > 0 and not self._in_flight):
                    claimed = await self._claim_and_start()
                    if claimed and self._free_slots() >= self._claim_batch:
                        continue  # there may be more due right now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._attention.wait(), self.settings.delivery_poll_interval_seconds
                    )
        finally:
            wakeup.forget(self._attention)
            stopping.cancel()
            await self._drain()
            await self._outcomes.put(None)
            await recorder
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
            await self.sender.close()
            log.info("delivery_worker_stopped")

    async def _attend_when_set(self, event: asyncio.Event) -> None:
        await event.wait()
        self._attention.set()

    def _free_slots(self) -> int:
        """Room for claiming: deliveries running plus those claimed and waiting here may reach
        PREFETCH times the concurrency, so that claims come in large batches (a claim costs
        about the same for 10 rows as for 200) and a freed slot never waits for one."""
        return (
            PREFETCH * self.settings.delivery_concurrency
            - len(self._in_flight)
            - self._waiting_count()
        )

    async def _claim_and_start(self) -> int:
        cap = self.settings.delivery_concurrency_per_target
        free = self._free_slots()
        if free <= 0:
            return 0
        # Targets with a full queue here are left out of the claim: their deliveries stay in the
        # database for whichever worker has room, and other targets' deliveries go first.
        full = [
            webhook_id
            for target in self._targets.values()
            if target.running + len(target.waiting) >= PREFETCH * cap
            for webhook_id in target.webhook_ids
        ]
        try:
            async with self.database.session() as session:
                claimed = await service.claim_due_deliveries(
                    session, limit=free, lease=self.lease, exclude_webhooks=full
                )
                await session.commit()
        except Exception:
            log.exception("delivery_claim_failed")
            return 0
        overflow: list[ClaimedDelivery] = []
        for delivery in claimed:
            if delivery.target is None:
                continue  # the webhook was deleted; its delivery went with it
            key = _target_key(delivery.target.target_url)
            target = self._targets.setdefault(key, _Target())
            target.webhook_ids.add(delivery.webhook_id)
            if target.running + len(target.waiting) < PREFETCH * cap:
                target.waiting.append(delivery)
            else:
                overflow.append(delivery)
        self._start_waiting()
        if overflow:
            await self._release(overflow, due_in=SATURATED_RETRY_DELAY)
        return len(claimed)

    def _waiting_count(self) -> int:
        return sum(len(t.waiting) for t in self._targets.values())

    def _start_waiting(self) -> None:
        """Start claimed deliveries while there are free slots, at most `cap` per target, taking
        the targets in turn."""
        cap = self.settings.delivery_concurrency_per_target
        limit = self.settings.delivery_concurrency
        while len(self._in_flight) < limit:
            started = False
            for key, target in list(self._targets.items()):
                if target.waiting and target.running < cap and len(self._in_flight) < limit:
                    self._start(target.waiting.popleft(), key, target)
                    started = True
            if not started:
                return

    def _start(self, delivery: ClaimedDelivery, key: str, target: _Target) -> None:
        target.running += 1
        task = asyncio.create_task(self._deliver(delivery, key, target))
        self._in_flight.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        if self._free_slots() >= self._claim_batch:
            self._attention.set()

    # --- one delivery ----------------------------------------------------------------------

    async def _deliver(self, delivery: ClaimedDelivery, key: str, target: _Target) -> None:
        try:
            await self._outcomes.put(await self._attempt(delivery))
        except Exception:
            # Never lose the claim silently: log it; the lease makes the delivery due again.
            log.exception("delivery_attempt_crashed", deliveryId=delivery.delivery_id)
        finally:
            target.running -= 1
            if target.running == 0 and not target.waiting:
                self._targets.pop(key, None)
            self._in_flight.discard(asyncio.current_task())
            self._start_waiting()

    async def _attempt(self, delivery: ClaimedDelivery) -> Outcome:
        target = delivery.target
        assert target is not None
        attempted_at = clock.now()
        if not target.is_active:
            return Outcome(
                claimed=delivery,
                status=ResultStatus.FAILED,
                target_url=target.target_url,
                http_status=None,
                response_body=None,
                error_message="not sent: the webhook is inactive; this delivery is cancelled",
                duration_ms=0,
                attempted_at=attempted_at,
                next_attempt_at=None,
            )
        headers = delivery_headers(
            secrets=target.signing_secrets,
            message_id=delivery.event_id,
            timestamp=int(time.time()),
            body=delivery.payload,
            event_type=delivery.event_type,
            user_agent=USER_AGENT,
        )
        result = await self.sender.send(
            target.target_url, body=delivery.payload, headers=headers, now=attempted_at
        )
        return self._outcome(delivery, result, attempted_at)

    def _outcome(
        self, delivery: ClaimedDelivery, result: SendResult, attempted_at: datetime
    ) -> Outcome:
        assert delivery.target is not None
        now = clock.now()
        next_at = None
        if result.succeeded:
            status = ResultStatus.SUCCESS
        else:
            delay = next_attempt_delay(
                attempts_made=delivery.attempt,
                schedule=self.settings.retry_schedule,
                rng=self._rng,
                retry_after=result.retry_after,
                retry_after_max=timedelta(seconds=self.settings.retry_after_max_seconds),
            )
            status = ResultStatus.EXHAUSTED if delay is None else ResultStatus.PENDING_RETRY
            next_at = None if delay is None else now + delay
        return Outcome(
            claimed=delivery,
            status=status,
            target_url=delivery.target.target_url,
            http_status=result.http_status,
            response_body=result.response_body,
            error_message=result.error_message,
            duration_ms=result.duration_ms,
            attempted_at=attempted_at,
            next_attempt_at=next_at,
        )

    # --- recording -------------------------------------------------------------------------

    async def _record_outcomes_forever(self) -> None:
        """Record outcomes in batches until the None that `run` queues at shutdown."""
        finishing = False
        while not finishing:
            first = await self._outcomes.get()
            if first is None:
                return
            batch = [first]
            # Let a burst gather into one transaction (one transaction costs about as much as
            # a hundred more rows in it).
            lingered = 0.0
            while self._outcomes.qsize() < RECORD_BATCH_MAX and lingered < RECORD_LINGER_SECONDS:
                await asyncio.sleep(0.002)
                lingered += 0.002
            while len(batch) < RECORD_BATCH_MAX and not self._outcomes.empty():
                outcome = self._outcomes.get_nowait()
                if outcome is None:
                    finishing = True
                    break
                batch.append(outcome)
            await self._write(batch)

    async def _write(self, batch: list[Outcome]) -> None:
        """Record a batch, retrying while the database is unavailable: an outcome that is never
        recorded only means its delivery is sent again when the lease runs out."""
        delay = 0.2
        for _ in range(8):
            try:
                async with self.database.session() as session:
                    await service.record_outcomes(session, batch)
                    await session.commit()
                return
            except Exception:
                log.exception("delivery_record_failed", batch=len(batch))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5)

    async def _release(self, claims: list[ClaimedDelivery], *, due_in: timedelta) -> None:
        try:
            async with self.database.session() as session:
                await service.release_claims(session, claims, due_at=clock.now() + due_in)
                await session.commit()
        except Exception:
            log.exception("delivery_release_failed", count=len(claims))

    async def _drain(self) -> None:
        """On shutdown: give back what has not started, let attempts in flight finish (each is
        bounded by the send timeout)."""
        waiting = [d for t in self._targets.values() for d in t.waiting]
        for target in self._targets.values():
            target.waiting.clear()
        await self._release(waiting, due_in=timedelta(0))
        if self._in_flight:
            log.info("delivery_worker_draining", inFlight=len(self._in_flight))
            await asyncio.wait(
                set(self._in_flight), timeout=self.settings.delivery_timeout_seconds + 5
            )
        for task in list(self._in_flight):
            task.cancel()
