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
from collections import Counter
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
RECORD_LINGER_SECONDS = 0.005
SATURATED_RETRY_DELAY = timedelta(seconds=1)


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
        self._rng = random.Random()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._per_target: Counter[str] = Counter()
        self._webhook_targets: dict[int, str] = {}
        # Outcomes waiting to be recorded; None tells the recorder to finish and return.
        self._outcomes: asyncio.Queue[Outcome | None] = asyncio.Queue()
        self._slot_freed = asyncio.Event()

    # --- main loop -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set, then finish what is in flight (releasing what cannot
        start) and record every outcome before returning."""
        woken = wakeup.waiter()
        recorder = asyncio.create_task(self._record_outcomes_forever(), name="delivery-recorder")
        listener = None
        if self.database.dialect == "postgresql":
            listener = asyncio.create_task(
                listen_for_notifications(self.database.url, stop), name="delivery-listener"
            )
        log.info("delivery_worker_started", concurrency=self.settings.delivery_concurrency)
        try:
            while not stop.is_set():
                woken.clear()
                self._slot_freed.clear()
                started = await self._claim_and_start()
                free = self.settings.delivery_concurrency - len(self._in_flight)
                if started and free > 0:
                    continue  # there may be more due right now
                waits = [
                    asyncio.ensure_future(stop.wait()),
                    asyncio.ensure_future(self._slot_freed.wait() if free <= 0 else woken.wait()),
                ]
                await asyncio.wait(
                    waits,
                    timeout=self.settings.delivery_poll_interval_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for waiting in waits:
                    waiting.cancel()
        finally:
            wakeup.forget(woken)
            await self._drain()
            await self._outcomes.put(None)
            await recorder
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
            await self.sender.close()
            log.info("delivery_worker_stopped")

    async def _claim_and_start(self) -> int:
        free = self.settings.delivery_concurrency - len(self._in_flight)
        if free <= 0:
            return 0
        saturated = [
            webhook_id
            for webhook_id, key in self._webhook_targets.items()
            if self._per_target[key] >= self.settings.delivery_concurrency_per_target
        ]
        try:
            async with self.database.session() as session:
                claimed = await service.claim_due_deliveries(
                    session, limit=free, lease=self.lease, exclude_webhooks=saturated
                )
                await session.commit()
        except Exception:
            log.exception("delivery_claim_failed")
            return 0
        too_many: list[ClaimedDelivery] = []
        for delivery in claimed:
            if delivery.target is None:
                continue  # the webhook was deleted; its delivery went with it
            key = _target_key(delivery.target.target_url)
            if self._per_target[key] >= self.settings.delivery_concurrency_per_target:
                too_many.append(delivery)
                continue
            self._per_target[key] += 1
            self._webhook_targets[delivery.webhook_id] = key
            task = asyncio.create_task(self._deliver(delivery, key))
            self._in_flight.add(task)
            task.add_done_callback(self._finished)
        if too_many:
            await self._release(too_many, due_in=SATURATED_RETRY_DELAY)
        return len(claimed)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._slot_freed.set()

    # --- one delivery ----------------------------------------------------------------------

    async def _deliver(self, delivery: ClaimedDelivery, key: str) -> None:
        try:
            await self._outcomes.put(await self._attempt(delivery))
        except Exception:
            # Never lose the claim silently: log it; the lease makes the delivery due again.
            log.exception("delivery_attempt_crashed", deliveryId=delivery.delivery_id)
        finally:
            self._per_target[key] -= 1
            if self._per_target[key] <= 0:
                del self._per_target[key]
                self._webhook_targets.pop(delivery.webhook_id, None)

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
            await asyncio.sleep(RECORD_LINGER_SECONDS)  # let a burst gather into one transaction
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
        """On shutdown: let attempts in flight finish (each is bounded by the send timeout)."""
        if self._in_flight:
            log.info("delivery_worker_draining", inFlight=len(self._in_flight))
            await asyncio.wait(
                set(self._in_flight), timeout=self.settings.delivery_timeout_seconds + 5
            )
        for task in list(self._in_flight):
            task.cancel()
