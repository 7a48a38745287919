"""The recorder: outcomes of attempts gathered into batches, each recorded in one statement,
retried while the database is unavailable and, at shutdown, for a bounded time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

import structlog

from tucano.core.logs import exception_summary
from tucano.core.metrics import record_attempt
from tucano.db.outages import is_database_unavailable
from tucano.deliveries.queue.backend import Outcome, QueueBackend

log = structlog.get_logger("tucano.deliveries")

RECORD_BATCH_MAX = 500
# A burst gathers into one statement for this long: a statement costs far more than its rows.
RECORD_LINGER_SECONDS = 0.02
# A batch is retried for as long as the database is unavailable while the worker runs (an
# outcome never recorded is a history without that attempt, and a second send once its lease
# runs out); at shutdown, for this long at most, as the service manager is waiting.
RECORD_AT_STOP_SECONDS = 5.0
RECORD_RETRY_PAUSES = (0.2, 5.0)  # the first pause, doubled after each failure up to the second
# A batch the database refuses for another reason (a fault, not an outage) is retried this often.
RECORD_FAULT_RETRIES = 8


class Recorder:
    """Outcomes waiting to be recorded, and the task that records them in batches.

    `unrecorded` is True while outcomes wait for a database that has not taken them: the worker
    claims nothing meanwhile, or, once the database is back, it could take its own deliveries
    again (their lease run out) before recording that it sent them, and send them twice.
    """

    def __init__(self, queue: QueueBackend, *, on_recorded: Callable[[], None]) -> None:
        self.queue = queue
        self.outcomes: list[Outcome] = []  # not handed to the database yet
        self.outcomes_waiting = asyncio.Event()
        self.unrecorded = False
        self._on_recorded = on_recorded  # a batch went in: claims may go on
        self._give_up_at: float | None = None  # monotonic, once stopping

    def add(self, outcomes: Iterable[Outcome]) -> None:
        added = list(outcomes)
        self.outcomes += added
        self.outcomes_waiting.set()
        # Counted as they are made, recorded or not: an attempt that was made was made. Its
        # answer came at the attempt's start plus its duration (no clock read per attempt).
        for o in added:
            since_event = (o.attempted_at - o.claimed.event_created_at).total_seconds()
            record_attempt(o.status, latency_seconds=since_event + o.duration_ms / 1000)

    async def record_until(self, finished: asyncio.Event) -> None:
        """Record outcomes in batches; once `finished` is set, record what is left and return."""
        while True:
            await self.outcomes_waiting.wait()
            self.outcomes_waiting.clear()
            if not finished.is_set():
                await asyncio.sleep(RECORD_LINGER_SECONDS)
            while self.outcomes:
                batch = self.outcomes[:RECORD_BATCH_MAX]
                del self.outcomes[:RECORD_BATCH_MAX]
                await self.record(batch, stopping=finished)
            if finished.is_set():
                return

    def wake(self) -> None:
        """Wake the recording task (to see that `finished` is set, say)."""
        self.outcomes_waiting.set()

    async def record(self, batch: list[Outcome], *, stopping: asyncio.Event) -> None:
        """Record a batch, retrying while the database is unavailable (see
        RECORD_AT_STOP_SECONDS). A batch left unrecorded is logged: its deliveries are sent again
        when their lease runs out."""
        delay, longest = RECORD_RETRY_PAUSES
        failures = faults = 0
        while True:
            if stopping.is_set() and self._give_up_at is None:
                # One allowance for the whole stop, whatever the number of batches.
                self._give_up_at = time.monotonic() + RECORD_AT_STOP_SECONDS
            out_of_time = self._give_up_at is not None and time.monotonic() >= self._give_up_at
            if out_of_time or faults >= RECORD_FAULT_RETRIES:
                self._log_unrecorded(batch)
                return
            try:
                await self._try_record(batch, stopping)
            except Exception as exc:
                failures += 1
                self.unrecorded = True
                unavailable = isinstance(exc, TimeoutError) or is_database_unavailable(exc)
                faults += not unavailable
                if failures == 1 and not unavailable:
                    log.exception("delivery_record_failed", batch=len(batch))
                else:
                    log.warning(
                        "delivery_record_failed",
                        batch=len(batch),
                        error=exception_summary(exc)[:300],
                        failuresInARow=failures,
                    )
            else:
                if failures:
                    log.info("delivery_record_resumed", batch=len(batch), failuresInARow=failures)
                # Claims go on once no outcome is left to record (those that came meanwhile,
                # still queued, may be of deliveries whose lease ran out during the outage).
                self.unrecorded = self.unrecorded and bool(self.outcomes)
                self._on_recorded()
                return
            if self._give_up_at is not None:
                delay = min(delay, max(0.0, self._give_up_at - time.monotonic()))
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)

    async def _try_record(self, batch: list[Outcome], stopping: asyncio.Event) -> None:
        """One try at recording `batch`; once stopping, given up (TimeoutError) when the stop's
        allowance runs out, even if it began before the stop (a database that hangs rather than
        refuses would otherwise hold the stop for ever)."""
        record = asyncio.ensure_future(self.queue.record(batch))
        # A try given up is not waited for; whatever it ends in is not news.
        record.add_done_callback(lambda task: task.cancelled() or task.exception())
        while not record.done():
            if self._give_up_at is None:
                stop = asyncio.ensure_future(stopping.wait())
                await asyncio.wait({record, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if stopping.is_set() and self._give_up_at is None:
                    self._give_up_at = time.monotonic() + RECORD_AT_STOP_SECONDS
                continue
            left = self._give_up_at - time.monotonic()
            if left <= 0:
                record.cancel()
                raise TimeoutError("the stop's allowance for recording ran out")
            await asyncio.wait({record}, timeout=left)
        record.result()

    def _log_unrecorded(self, batch: list[Outcome]) -> None:
        self.unrecorded = False
        event_ids = sorted({o.claimed.event_id for o in batch})
        for start in range(0, len(event_ids), 50):  # lines of a readable length
            log.error(
                "delivery_outcomes_unrecorded",
                batch=len(batch),
                eventIds=event_ids[start : start + 50],
                why="sent again when their lease runs out",
            )
