"""The worker's senders: a pool of coroutines (TUCANO_DELIVERY_CONCURRENCY) that take deliveries
from the dispatcher, attempt each and hand its outcome to the recorder.

Enough hanging hosts at their cap would take every sender. So an attempt in flight longer than
TUCANO_DELIVERY_SLOW_AFTER_SECONDS gives its place in the pool to a new sender (its own coroutine
ends with the attempt), up to SLOW_ATTEMPTS_PER_SENDER times the concurrency. A host with such an
attempt is slow until one of its attempts is quick again (the dispatcher counts what is held
for it apart).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from tucano.core.clock import clock
from tucano.deliveries.queue.backend import ClaimedDelivery
from tucano.deliveries.worker import attempts
from tucano.deliveries.worker.attempts import RetryPolicy
from tucano.deliveries.worker.dispatcher import Dispatcher, Target
from tucano.deliveries.worker.recorder import Recorder
from tucano.deliveries.worker.sender import Sender

log = structlog.get_logger("tucano.deliveries")

# Slow attempts (and so extra senders) a worker may have beside its pool, per sender of the pool:
# an attempt waiting on a hanging host costs a socket and a coroutine, no CPU.
SLOW_ATTEMPTS_PER_SENDER = 16


@dataclass(eq=False)
class _Slot:
    """What one sender coroutine is doing, for the watch on slow attempts."""

    target: Target | None = None
    started: float = 0.0  # monotonic time its attempt started
    replaced: bool = False  # its attempt is slow and a new sender took its place


class SenderPool:
    """The sender coroutines of one worker, and the watch that replaces slow ones."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        recorder: Recorder,
        sender: Sender,
        retries: RetryPolicy,
        concurrency: int,
        max_slow_attempts: int,
        slow_after: float,
        start_by: Callable[[ClaimedDelivery], datetime | None],
        on_done: Callable[[Target], None],
        on_stale: Callable[[ClaimedDelivery], None],
        on_slow: Callable[[], None],
    ) -> None:
        self.dispatcher = dispatcher
        self.recorder = recorder
        self.sender = sender
        self.retries = retries
        self.concurrency = concurrency
        self.max_slow_attempts = max_slow_attempts
        self.slow_after = slow_after
        # The latest moment an attempt of a delivery may start (its lease must outlast it).
        self._start_by = start_by
        self._on_done = on_done  # a delivery of this target is done: room to claim
        self._on_stale = on_stale  # too late to start: to be given back unsent
        self._on_slow = on_slow  # a host turned slow: what is held for it no longer counts
        self._slots: set[_Slot] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._replaced = 0  # slow attempts whose senders were replaced

    def start(self) -> asyncio.Task[None]:
        """Start the pool's senders; the task returned watches for slow attempts."""
        for _ in range(self.concurrency):
            self._start_sender()
        return asyncio.create_task(self._watch_for_slow_attempts(), name="delivery-slow-watch")

    async def wait_finished(self, within: float) -> None:
        """Let the senders finish what they hold (the dispatcher is closed), for `within` s at
        most; those still running then are cancelled."""
        _, unfinished = await asyncio.wait(set(self._tasks), timeout=within)
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.wait(unfinished)

    def _start_sender(self) -> None:
        slot = _Slot()
        self._slots.add(slot)
        task = asyncio.create_task(self._send_forever(slot), name="delivery-sender")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch_for_slow_attempts(self) -> None:
        """Give the place of each attempt that turns slow to a new sender (see module doc)."""
        while True:
            await asyncio.sleep(self.slow_after / 4)
            now = time.monotonic()
            for slot in list(self._slots):
                target = slot.target
                if target is None or now - slot.started < self.slow_after:
                    continue
                if not target.slow:
                    self.dispatcher.mark_slow(target)
                    self._on_slow()
                if not slot.replaced and self._replaced < self.max_slow_attempts:
                    slot.replaced = True
                    self._replaced += 1
                    self._start_sender()

    async def _send_forever(self, slot: _Slot) -> None:
        while (handed := await self.dispatcher.next()) is not None:
            delivery, target = handed
            quick = False  # an attempt answered within the slow mark (a give-back is none)
            now = clock.now()
            try:
                start_by = self._start_by(delivery)
                if start_by is not None and now > start_by:
                    self._on_stale(delivery)
                    continue
                slot.target, slot.started = target, time.monotonic()
                outcome = await attempts.attempt(
                    delivery, sender=self.sender, retries=self.retries, attempted_at=now
                )
                self.recorder.add([outcome])
                quick = time.monotonic() - slot.started < self.slow_after
            except Exception:
                log.exception(
                    "delivery_attempt_crashed",
                    deliveryId=delivery.delivery_id,
                    eventId=delivery.event_id,
                    webhookId=delivery.webhook_id,
                )
                crashed = attempts.crashed_outcome(delivery, retries=self.retries, attempted_at=now)
                if crashed is not None:
                    self.recorder.add([crashed])
            finally:
                slot.target = None
                self.dispatcher.done(target, quick=quick)
                self._on_done(target)
            if slot.replaced:  # another sender has taken this one's place
                self._replaced -= 1
                break
        self._slots.discard(slot)


def start_by(lease_until: datetime, *, timeout: float, lease_seconds: float) -> datetime:
    """The latest moment an attempt may start before `lease_until` and still be over (and
    recorded) before another worker may claim the delivery: the send timeout and a quarter of
    what the lease leaves beyond it."""
    return lease_until - timedelta(seconds=timeout + (lease_seconds - timeout) / 4)
