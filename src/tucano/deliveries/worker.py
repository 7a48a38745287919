"""The delivery worker: claim due deliveries, POST them with bounded concurrency, record outcomes.

    claim loop ──claims──▶ dispatcher ──▶ N senders ──outcomes──▶ recorder
        ▲                 (per target:                          (one statement
        └── wake-up /      queue + cap)                           per batch)
            room freed / poll

A pool of sender coroutines (TUCANO_DELIVERY_CONCURRENCY) takes deliveries from the
dispatcher, which hands out the receiving hosts in turn and never more than
TUCANO_DELIVERY_CONCURRENCY_PER_TARGET at once to one host, so a host that hangs holds only its
own share of the senders. No transaction is open while a POST is in flight.

Hanging hosts are common at scale, and enough of them at their cap would take every sender. So an
attempt in flight longer than TUCANO_DELIVERY_SLOW_AFTER_SECONDS gives its place in the pool to a
new sender (its own coroutine ends with the attempt), up to SLOW_ATTEMPTS_PER_SENDER times the
concurrency. A host with such an attempt is slow until one of its attempts is quick again: what
is held for it does not count against the worker's prefetch, and it is left out of claims as soon
as it has its cap in hand.

A claimed delivery carries a lease (its `lease_until`); a worker that dies
simply lets its leases run out and another worker claims them again, so an event may arrive
twice but is never lost. A worker holds at most PREFETCH times its concurrency; a target it
already holds plenty for is left out of its next claims (its backlog stays in the database for
whichever worker has room), and a held delivery whose lease would run out before its attempt
could finish is given back unsent rather than risk a second worker sending it too.
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
from tucano.db import Database, is_database_unavailable
from tucano.deliveries import queue
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue import ClaimedDelivery, Outcome
from tucano.deliveries.retry import next_attempt_delay
from tucano.deliveries.sender import USER_AGENT, Sender, SendResult
from tucano.deliveries.wakeup import (
    WebhookChange,
    listen_for_notifications,
    wakeup,
    webhook_changes,
)
from tucano.errors import exception_summary
from tucano.runtime import open_files_limit
from tucano.webhooks.signing import delivery_headers

log = structlog.get_logger("tucano.deliveries")

RECORD_BATCH_MAX = 500
RECORD_LINGER_SECONDS = 0.02
# A batch of outcomes is retried for as long as the database is unavailable while the worker
# runs (an outcome never recorded is a history without that attempt, and a second send once its
# lease runs out); at shutdown, for this long at most, as the service manager is waiting.
RECORD_AT_STOP_SECONDS = 5.0
RECORD_RETRY_PAUSES = (0.2, 5.0)  # the first pause, doubled after each failure up to the second
# A batch the database refuses for another reason (a fault, not an outage) is retried this often.
RECORD_FAULT_RETRIES = 8
# Pauses before giving claims back again after the database was unavailable.
RELEASE_RETRY_PAUSES = (0.2, 1.0)
# Claimed deliveries held here (waiting plus being sent) may reach PREFETCH times the
# concurrency, so that claims come in large batches (a claim costs about the same for 10 rows as
# for 200) and a sender that frees up never waits for one.
PREFETCH = 8
# Slow attempts (and so extra senders) a worker may have beside its pool, per sender of the pool:
# an attempt waiting on a hanging host costs a socket and a coroutine, no CPU.
SLOW_ATTEMPTS_PER_SENDER = 16
# After a failed claim (the database is down, say), claims pause 0.5 s, then twice as long after
# each further failure, up to this: a worker neither hammers a sick database nor floods its log.
CLAIM_PAUSE_MAX_SECONDS = 8.0


def _target_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass(eq=False)
class _Target:
    """One receiving host: claimed deliveries waiting for it, and how many are being sent."""

    key: str
    running: int = 0
    waiting: deque[ClaimedDelivery] = field(default_factory=deque)
    webhook_ids: set[int] = field(default_factory=set)
    queued: bool = False  # in the dispatcher's turn order
    slow: bool = False  # an attempt ran past the slow mark, and none has been quick since


@dataclass(eq=False)
class _SenderSlot:
    """What one sender coroutine is doing, for the watch on slow attempts."""

    target: _Target | None = None
    started: float = 0.0  # monotonic time its attempt started
    replaced: bool = False  # its attempt is slow and a new sender took its place


def _not_sent(delivery: ClaimedDelivery, why: str, *, at: datetime) -> Outcome:
    """The last record of a delivery cancelled before its attempt."""
    return Outcome(
        claimed=delivery,
        status=ResultStatus.FAILED,
        target_url=delivery.target.target_url if delivery.target else "",
        http_status=None,
        response_body=None,
        error_message=f"not sent: {why}; this delivery is cancelled",
        duration_ms=0,
        attempted_at=at,
        next_attempt_at=None,
    )


class _Dispatcher:
    """Claimed deliveries grouped by target, handed to senders target by target in turn."""

    def __init__(self, per_target: int) -> None:
        self.per_target = per_target
        self.targets: dict[str, _Target] = {}
        self.waiting = 0  # claimed, not yet handed out
        self.running = 0  # handed out, not yet done
        self._turns: deque[_Target] = deque()  # targets with waiting work and a free slot
        self.slow: set[_Target] = set()
        # What slow targets hold, kept as it changes: the worker asks after every delivery, and
        # adding it up would cost a pass over every slow target each time.
        self._held_for_slow = 0
        self._idle: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def held(self, target: _Target) -> int:
        return target.running + len(target.waiting)

    def held_for_slow_targets(self) -> int:
        return self._held_for_slow

    def mark_slow(self, target: _Target) -> None:
        if not target.slow:
            target.slow = True
            self.slow.add(target)
            self._held_for_slow += self.held(target)

    def _unmark_slow(self, target: _Target) -> None:
        if target.slow:
            target.slow = False
            self.slow.discard(target)
            self._held_for_slow -= self.held(target)

    def add(self, delivery: ClaimedDelivery, url: str) -> _Target:
        key = _target_key(url)
        target = self.targets.get(key)
        if target is None:
            target = self.targets[key] = _Target(key)
        target.webhook_ids.add(delivery.webhook_id)
        target.waiting.append(delivery)
        self.waiting += 1
        if target.slow:
            self._held_for_slow += 1
        self._offer(target)
        return target

    def _offer(self, target: _Target) -> None:
        if not target.queued and target.waiting and target.running < self.per_target:
            target.queued = True
            self._turns.append(target)
            while self._idle:
                idle = self._idle.popleft()
                if not idle.done():
                    idle.set_result(None)
                    break

    async def next(self) -> tuple[ClaimedDelivery, _Target] | None:
        """The next delivery to send, waiting for one if need be; None once closed."""
        while True:
            while not self._turns:
                if self._closed:
                    return None
                idle = asyncio.get_running_loop().create_future()
                self._idle.append(idle)
                await idle
            target = self._turns.popleft()
            target.queued = False
            if target.waiting:  # (emptied meanwhile by take_webhook)
                break
        delivery = target.waiting.popleft()
        self.waiting -= 1
        target.running += 1
        self.running += 1
        self._offer(target)  # its next delivery, if any, goes to the back of the line
        return delivery, target

    def done(self, target: _Target, *, quick: bool) -> None:
        """One of `target`'s deliveries is finished; `quick`: its attempt answered within the
        slow mark (a slow host is slow no more)."""
        target.running -= 1
        self.running -= 1
        if target.slow:
            self._held_for_slow -= 1
            if quick:
                self._unmark_slow(target)
        if target.running == 0 and not target.waiting:
            self._forget(target)
        else:
            self._offer(target)

    def _forget(self, target: _Target) -> None:
        del self.targets[target.key]
        self._unmark_slow(target)

    def take_webhook(self, webhook_id: int) -> list[ClaimedDelivery]:
        """The deliveries of one webhook not handed out yet, taken out of the dispatcher."""
        taken: list[ClaimedDelivery] = []
        for target in list(self.targets.values()):
            if webhook_id not in target.webhook_ids:
                continue
            kept = deque(d for d in target.waiting if d.webhook_id != webhook_id)
            taken += [d for d in target.waiting if d.webhook_id == webhook_id]
            if target.slow:
                self._held_for_slow -= len(target.waiting) - len(kept)
            target.waiting = kept
            if target.running == 0 and not target.waiting:
                self._forget(target)
        self.waiting -= len(taken)
        return taken

    def take_waiting(self) -> list[ClaimedDelivery]:
        """Everything not handed out yet (to give back on shutdown)."""
        taken = [d for t in self.targets.values() for d in t.waiting]
        for target in list(self.targets.values()):
            if target.slow:
                self._held_for_slow -= len(target.waiting)
            target.waiting.clear()
            if target.running == 0:
                self._forget(target)
        self._turns.clear()
        for target in self.targets.values():
            target.queued = False
        self.waiting = 0
        return taken

    def close(self) -> None:
        """Senders finish what they hold, then `next()` answers None."""
        self._closed = True
        while self._idle:
            idle = self._idle.popleft()
            if not idle.done():
                idle.set_result(None)


class DeliveryWorker:
    def __init__(self, database: Database, settings: Settings, *, sender: Sender | None = None):
        self.database = database
        self.settings = settings
        self._concurrency = settings.delivery_concurrency
        # Each slow attempt holds a socket: leave half the process's open files for the rest.
        self._most_slow = max(
            0,
            min(
                SLOW_ATTEMPTS_PER_SENDER * self._concurrency,
                open_files_limit() // 2 - self._concurrency,
            ),
        )
        self.sender = sender or Sender(
            allowed_networks=settings.webhook_allowed_networks,
            allow_http=settings.is_sandbox,
            timeout=settings.delivery_timeout_seconds,
            max_connections=self._concurrency + self._most_slow,
        )
        self.lease = timedelta(seconds=settings.delivery_lease_seconds)
        self._slow_after = settings.delivery_slow_after_seconds
        self._slots: set[_SenderSlot] = set()
        self._senders: set[asyncio.Task[None]] = set()
        self._slow_now = 0  # slow attempts whose senders were replaced
        self._claim_batch = settings.delivery_concurrency
        self._rng = random.Random()
        self._dispatcher = _Dispatcher(settings.delivery_concurrency_per_target)
        # A target this worker holds this many claimed deliveries for is left out of claims.
        self._saturated = PREFETCH * settings.delivery_concurrency_per_target
        self._more_due = False
        self._claim_failures = 0  # in a row
        self._claims_paused_until = 0.0  # monotonic
        # Outcomes the database has not taken yet (an outage): no claims meanwhile, or, once it
        # is back, this worker could take its own deliveries again (their lease run out) before
        # recording that it sent them, and send them twice.
        self._unrecorded = False
        self._record_give_up_at: float | None = None  # monotonic, once stopping
        # Webhooks changed or deleted lately (monotonic time, deleted?): a claim that started
        # before the change read the old values.
        self._changes: dict[int, tuple[float, bool]] = {}
        self._changes_missed_at = float("-inf")  # when changes may have been missed (monotonic)
        self._left_out: set[str] = set()  # keys of the targets the last claim left out
        self._outcomes: list[Outcome] = []
        self._stale: list[ClaimedDelivery] = []
        self._outcome_ready = asyncio.Event()
        self._attention = asyncio.Event()

    # --- main loop -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set, then finish what is in flight (releasing what has not
        started) and record every outcome before returning."""
        # One event wakes the claim loop: new deliveries committed (wakeup), room freed, stop.
        self._attention = wakeup.waiter()
        webhook_changes.listen(self._on_webhook_change)
        stopping = asyncio.create_task(self._attend_when_set(stop), name="delivery-stop")
        recording = asyncio.Event()
        recorder = asyncio.create_task(
            self._record_outcomes_until(recording), name="delivery-recorder"
        )
        for _ in range(self._concurrency):
            self._start_sender()
        watch = asyncio.create_task(self._watch_for_slow_attempts(), name="delivery-slow-watch")
        listener = None
        if self.database.dialect == "postgresql":
            listener = asyncio.create_task(
                listen_for_notifications(self.database.url, stop), name="delivery-listener"
            )
        log.info("delivery_worker_started", concurrency=self._concurrency)
        try:
            while not stop.is_set():
                self._attention.clear()
                await self._give_back_stale()
                room = self._room()
                # Claim in batches: with work in hand, wait until a good share of the room is
                # free rather than run one claim transaction per finished delivery.
                if room >= self._claim_batch or (room > 0 and not self._holding()):
                    await self._claim(room)
                    if self._more_due and self._room() >= self._claim_batch:
                        continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._attention.wait(), self.settings.delivery_poll_interval_seconds
                    )
        finally:
            wakeup.forget(self._attention)
            webhook_changes.forget(self._on_webhook_change)
            stopping.cancel()
            watch.cancel()
            await self._drain()
            recording.set()
            self._outcome_ready.set()
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

    def _holding(self) -> int:
        return self._dispatcher.waiting + self._dispatcher.running

    def _room(self) -> int:
        holding = self._holding()
        # What is held for slow hosts waits on them, not on the pool: it does not count against
        # the prefetch, only against a bound on everything held.
        for_the_pool = holding - self._dispatcher.held_for_slow_targets()
        return min(
            PREFETCH * self._concurrency - for_the_pool,
            (PREFETCH + SLOW_ATTEMPTS_PER_SENDER) * self._concurrency - holding,
        )

    async def _claim(self, room: int) -> None:
        dispatcher = self._dispatcher
        started = time.monotonic()
        if started < self._claims_paused_until or self._unrecorded:
            # Nothing claimed, so nothing known to be due: the loop waits for the poll (or the
            # record's wake-up) instead of coming straight back here.
            self._more_due = False
            return
        full = [
            t
            for t in dispatcher.targets.values()
            if dispatcher.held(t) >= (dispatcher.per_target if t.slow else self._saturated)
        ]
        self._left_out = {target.key for target in full}
        try:
            claim = await queue.claim_due_deliveries(
                self.database,
                limit=room,
                lease=self.lease,
                exclude_webhooks=[webhook_id for t in full for webhook_id in t.webhook_ids],
                exclude_hosts=[t.key for t in full],
            )
        except Exception as exc:
            self._claim_failures += 1
            pause = min(CLAIM_PAUSE_MAX_SECONDS, 0.5 * 2 ** min(self._claim_failures - 1, 10))
            self._claims_paused_until = time.monotonic() + pause
            if self._claim_failures == 1:
                log.exception("delivery_claim_failed", pauseSeconds=pause)
            else:  # the traceback was logged with the first failure
                log.warning(
                    "delivery_claim_failed",
                    error=exception_summary(exc)[:300],
                    failuresInARow=self._claim_failures,
                    pauseSeconds=pause,
                )
            self._more_due = False  # the poll tries again
            return
        if self._claim_failures:
            log.info("delivery_claims_resumed", failuresInARow=self._claim_failures)
            self._claim_failures = 0
        self._more_due = claim.more_due
        for webhook_id, (changed_at, _) in list(self._changes.items()):
            if changed_at < started - 60:
                del self._changes[webhook_id]
        any_missed = self._changes_missed_at >= started
        for delivery in claim.deliveries:
            change = self._changes.get(delivery.webhook_id)
            if change is not None and change[0] >= started:
                self._drop([delivery], deleted=change[1])
            elif delivery.target is None:  # the webhook was deleted, and its delivery with it
                continue
            elif any_missed:
                self._drop([delivery], deleted=False)
            else:
                dispatcher.add(delivery, delivery.target.target_url)

    def _on_webhook_change(self, change: WebhookChange | None) -> None:
        """A webhook changed or was deleted: what this worker holds for it carries the old URL,
        secret or state. Deliveries not started yet go back to the queue, to be claimed again
        with what the webhook is now (or, deleted, are recorded as cancelled). None: changes
        may have been missed (the listener was down), so that goes for everything held."""
        if change is None:
            self._changes_missed_at = time.monotonic()
            self._drop(self._dispatcher.take_waiting(), deleted=False)
            return
        self._changes[change.webhook_id] = (time.monotonic(), change.deleted)
        self._drop(self._dispatcher.take_webhook(change.webhook_id), deleted=change.deleted)

    def _drop(self, deliveries: list[ClaimedDelivery], *, deleted: bool) -> None:
        if not deliveries:
            return
        if deleted:
            now = clock.now()
            # Under this worker's lease, the deletion left them to it. Past it (the worker was
            # paused), the deletion may have recorded them itself: given back, they are
            # recorded only if nobody has been since the claim (see release_claims).
            self._record_deleted([d for d in deliveries if d.lease_until > now])
            deliveries = [d for d in deliveries if d.lease_until <= now]
            if not deliveries:
                return
        self._stale += deliveries
        self._attention.set()

    def _record_deleted(self, deliveries: list[ClaimedDelivery]) -> None:
        """The last record of deliveries whose webhook was deleted before their attempt."""
        if deliveries:
            now = clock.now()
            self._outcomes += [_not_sent(d, "the webhook was deleted", at=now) for d in deliveries]
            self._outcome_ready.set()

    async def _give_back_stale(self) -> None:
        if self._stale:
            stale, self._stale = self._stale, []
            await self._release(stale, due_in=timedelta(0))

    # --- sending ---------------------------------------------------------------------------

    def _start_sender(self) -> None:
        slot = _SenderSlot()
        self._slots.add(slot)
        task = asyncio.create_task(self._send_forever(slot), name="delivery-sender")
        self._senders.add(task)
        task.add_done_callback(self._senders.discard)

    async def _watch_for_slow_attempts(self) -> None:
        """Give the place of each attempt that turns slow to a new sender (see module doc)."""
        while True:
            await asyncio.sleep(self._slow_after / 4)
            now = time.monotonic()
            for slot in list(self._slots):
                target = slot.target
                if target is None or now - slot.started < self._slow_after:
                    continue
                if not target.slow:
                    self._dispatcher.mark_slow(target)
                    self._attention.set()  # its held deliveries no longer count: room to claim
                if not slot.replaced and self._slow_now < self._most_slow:
                    slot.replaced = True
                    self._slow_now += 1
                    self._start_sender()

    async def _send_forever(self, slot: _SenderSlot) -> None:
        dispatcher = self._dispatcher
        # An attempt started later than this before its lease ends might still be running (or
        # not yet recorded) when another worker claims the delivery.
        timeout = self.settings.delivery_timeout_seconds
        margin = timedelta(seconds=timeout + (self.settings.delivery_lease_seconds - timeout) / 4)
        while (handed := await dispatcher.next()) is not None:
            delivery, target = handed
            quick = False  # an attempt answered within the slow mark (a give-back is none)
            now = clock.now()
            try:
                if now + margin > delivery.lease_until:
                    self._stale.append(delivery)
                    self._attention.set()
                    continue
                slot.target, slot.started = target, time.monotonic()
                self._outcomes.append(await self._attempt(delivery, attempted_at=now))
                self._outcome_ready.set()
                quick = time.monotonic() - slot.started < self._slow_after
            except Exception:
                log.exception(
                    "delivery_attempt_crashed",
                    deliveryId=delivery.delivery_id,
                    eventId=delivery.event_id,
                    webhookId=delivery.webhook_id,
                )
                crashed = self._crashed(delivery, attempted_at=now)
                if crashed is not None:
                    self._outcomes.append(crashed)
                    self._outcome_ready.set()
            finally:
                slot.target = None
                dispatcher.done(target, quick=quick)
                # Claim again when room is made and there may be more due: the last claim was
                # full, or it left out this target, which has now fallen below the mark.
                # (Otherwise new deliveries announce themselves, and retries are polled for.)
                if (
                    self._more_due
                    or (target.key in self._left_out and dispatcher.held(target) < self._saturated)
                ) and self._room() >= self._claim_batch:
                    self._attention.set()
            if slot.replaced:  # another sender has taken this one's place
                self._slow_now -= 1
                break
        self._slots.discard(slot)

    async def _attempt(self, delivery: ClaimedDelivery, *, attempted_at: datetime) -> Outcome:
        target = delivery.target
        assert target is not None
        if not target.is_active:
            return _not_sent(delivery, "the webhook is inactive", at=attempted_at)
        if target.event_type != delivery.event_type:
            # Its owner changed what it receives since the delivery was queued (PUT eventType).
            return _not_sent(
                delivery,
                f"the webhook now receives {target.event_type}, not {delivery.event_type}",
                at=attempted_at,
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

    def _crashed(self, delivery: ClaimedDelivery, *, attempted_at: datetime) -> Outcome | None:
        """The record of an attempt that failed inside Tucano: a failed attempt like any other,
        retried on the schedule, so that a fault that repeats shows in the history and ends
        with the schedule. (Left to the lease, the delivery would come back each time its lease
        ran out, unrecorded, for ever.) None if even that fails: then the lease is all there is."""
        crash = SendResult(
            http_status=None,
            response_body=None,
            error_message="failed: an internal error in Tucano during the attempt (the "
            "receiver may have got it or not; the service's log has it, with this event's id); "
            "retried on the schedule",
            duration_ms=0,
        )
        try:
            return self._outcome(delivery, crash, attempted_at)._replace(about_the_receiver=False)
        except Exception:
            log.exception("delivery_attempt_unrecordable", deliveryId=delivery.delivery_id)
            return None

    def _outcome(
        self, delivery: ClaimedDelivery, result: SendResult, attempted_at: datetime
    ) -> Outcome:
        assert delivery.target is not None
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
            next_at = None if delay is None else clock.now() + delay
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

    async def _record_outcomes_until(self, finished: asyncio.Event) -> None:
        """Record outcomes in batches; once `finished` is set, record what is left and return."""
        while True:
            await self._outcome_ready.wait()
            self._outcome_ready.clear()
            if not finished.is_set():
                # Let a burst gather into one statement (one costs about as much as a hundred
                # more rows in it).
                await asyncio.sleep(RECORD_LINGER_SECONDS)
            while self._outcomes:
                batch = self._outcomes[:RECORD_BATCH_MAX]
                del self._outcomes[:RECORD_BATCH_MAX]
                await self._write(batch, stopping=finished)
            if finished.is_set():
                return

    async def _write(self, batch: list[Outcome], *, stopping: asyncio.Event) -> None:
        """Record a batch, retrying while the database is unavailable (see
        RECORD_AT_STOP_SECONDS). A batch left unrecorded is logged: its deliveries are sent again
        when their lease runs out."""
        delay, longest = RECORD_RETRY_PAUSES
        failures = faults = 0
        while True:
            if stopping.is_set() and self._record_give_up_at is None:
                # One allowance for the whole stop, whatever the number of batches.
                self._record_give_up_at = time.monotonic() + RECORD_AT_STOP_SECONDS
            out_of_time = (
                self._record_give_up_at is not None and time.monotonic() >= self._record_give_up_at
            )
            if out_of_time or faults >= RECORD_FAULT_RETRIES:
                self._log_unrecorded(batch)
                return
            try:
                await self._try_record(batch, stopping)
            except Exception as exc:
                failures += 1
                self._unrecorded = True
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
                self._unrecorded = self._unrecorded and bool(self._outcomes)
                self._attention.set()
                return
            if self._record_give_up_at is not None:
                delay = min(delay, max(0.0, self._record_give_up_at - time.monotonic()))
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)

    async def _try_record(self, batch: list[Outcome], stopping: asyncio.Event) -> None:
        """One try at recording `batch`; once stopping, given up (TimeoutError) when the stop's
        allowance runs out, even if it began before the stop (a database that hangs rather than
        refuses would otherwise hold the stop for ever)."""
        record = asyncio.ensure_future(queue.record_outcomes(self.database, batch))
        # A try given up is not waited for; whatever it ends in is not news.
        record.add_done_callback(lambda task: task.cancelled() or task.exception())
        while not record.done():
            if self._record_give_up_at is None:
                stop = asyncio.ensure_future(stopping.wait())
                await asyncio.wait({record, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if stopping.is_set() and self._record_give_up_at is None:
                    self._record_give_up_at = time.monotonic() + RECORD_AT_STOP_SECONDS
                continue
            left = self._record_give_up_at - time.monotonic()
            if left <= 0:
                record.cancel()
                raise TimeoutError("the stop's allowance for recording ran out")
            await asyncio.wait({record}, timeout=left)
        record.result()

    def _log_unrecorded(self, batch: list[Outcome]) -> None:
        self._unrecorded = False
        event_ids = sorted({o.claimed.event_id for o in batch})
        for start in range(0, len(event_ids), 50):  # lines of a readable length
            log.error(
                "delivery_outcomes_unrecorded",
                batch=len(batch),
                eventIds=event_ids[start : start + 50],
                why="sent again when their lease runs out",
            )

    async def _release(self, claims: list[ClaimedDelivery], *, due_in: timedelta) -> None:
        # Tried again after a lost connection (one the listener's loss often comes with): what
        # is not given back waits out its lease unsent.
        for pause in (*RELEASE_RETRY_PAUSES, None):
            try:
                cancelled = await queue.release_claims(
                    self.database, claims, due_at=clock.now() + due_in, lease=self.lease
                )
                break
            except Exception as exc:
                if pause is None or not is_database_unavailable(exc):
                    log.exception("delivery_release_failed", count=len(claims))
                    return
                log.warning(
                    "delivery_release_retried",
                    count=len(claims),
                    error=exception_summary(exc)[:300],
                )
                await asyncio.sleep(pause)
        # Their webhook was deleted while this worker held them, and nobody has recorded them
        # since: the deletion left their last record to it.
        self._record_deleted(cancelled)

    async def _drain(self) -> None:
        """On shutdown: give back what has not started, let attempts in flight finish (each is
        bounded by the send timeout)."""
        await self._release(self._dispatcher.take_waiting(), due_in=timedelta(0))
        self._dispatcher.close()
        await self._give_back_stale()
        if self._dispatcher.running:
            log.info("delivery_worker_draining", inFlight=self._dispatcher.running)
        _, unfinished = await asyncio.wait(
            set(self._senders), timeout=self.settings.delivery_timeout_seconds + 5
        )
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.wait(unfinished)
        await self._give_back_stale()
