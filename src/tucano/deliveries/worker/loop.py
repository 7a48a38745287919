"""The delivery worker's loop: claim due deliveries, hand them to the senders through the
dispatcher (which hands out the receiving hosts in turn and never more than
TUCANO_DELIVERY_CONCURRENCY_PER_TARGET at once to one host), record their outcomes; wake on new
deliveries, drop what a webhook change made stale, and on stop give back what has not started
and let attempts in flight finish. No transaction is open while a POST is in flight.

A claimed delivery carries a lease; a worker that dies lets its leases run out and another
worker claims them again, so an event may arrive twice but is never lost. A worker holds at
most PREFETCH times its concurrency; a target it already holds plenty for is left out of its
next claims (its backlog stays in the database for whichever worker has room), and a held
delivery whose lease would run out before its attempt could finish is given back unsent rather
than risk a second worker sending it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta

import structlog

from tucano.config import Settings
from tucano.core.clock import clock
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.db.outages import is_database_unavailable
from tucano.deliveries.queue import queue_for
from tucano.deliveries.queue.backend import ClaimedDelivery, QueueBackend
from tucano.deliveries.worker.attempts import RetryPolicy, not_sent
from tucano.deliveries.worker.dispatcher import Dispatcher, Target
from tucano.deliveries.worker.recorder import Recorder
from tucano.deliveries.worker.sender import Sender
from tucano.deliveries.worker.senders import SLOW_ATTEMPTS_PER_SENDER, SenderPool, start_by
from tucano.deliveries.worker.wakeup import listen_for_notifications, wakeup
from tucano.runtime import open_files_limit
from tucano.webhooks.changes import WebhookChange, webhook_changes
from tucano.webhooks.secret_store import WebhookSecretStore, load_secret_store

__all__ = ["PREFETCH", "SLOW_ATTEMPTS_PER_SENDER", "DeliveryWorker"]

log = structlog.get_logger("tucano.deliveries")

# Pauses before giving claims back again after the database was unavailable.
RELEASE_RETRY_PAUSES = (0.2, 1.0)
# Claimed deliveries held here (waiting plus being sent) may reach PREFETCH times the
# concurrency, so that claims come in large batches and a sender that frees up never waits.
PREFETCH = 8
# After a failed claim (the database is down, say), claims pause 0.5 s, then twice as long after
# each further failure, up to this: a worker neither hammers a sick database nor floods its log.
CLAIM_PAUSE_MAX_SECONDS = 8.0
# Webhook changes are remembered this long: claims that started before one read the old values.
CHANGES_KEPT_SECONDS = 60


class DeliveryWorker:
    def __init__(
        self,
        database: Database,
        settings: Settings,
        *,
        sender: Sender | None = None,
        secret_store: WebhookSecretStore | None = None,
        queue: QueueBackend | None = None,
    ):
        self.database = database
        self.settings = settings
        self.queue = queue or queue_for(database, settings)
        # Opens the webhooks' sealed signing secrets; without TUCANO_SECRET_KEY (sandbox), the
        # key is the database's generated one, read at the first claim.
        key = settings.secret_key
        self.secret_store = secret_store or (
            WebhookSecretStore.of(key.get_secret_value().encode(), settings) if key else None
        )
        concurrency = settings.delivery_concurrency
        # Each slow attempt holds a socket: leave half the process's open files for the rest.
        max_slow = max(
            0, min(SLOW_ATTEMPTS_PER_SENDER * concurrency, open_files_limit() // 2 - concurrency)
        )
        self.lease = timedelta(seconds=settings.delivery_lease_seconds)
        self._claim_batch = concurrency
        self._dispatcher = Dispatcher(settings.delivery_concurrency_per_target)
        # A target this worker holds this many claimed deliveries for is left out of claims.
        self._enough_per_target = PREFETCH * settings.delivery_concurrency_per_target
        self._more_due = False  # the last claim was full: more may be due
        self._claim_failures = 0  # in a row
        self._claims_paused_until = 0.0  # monotonic
        # Webhooks changed or deleted lately (monotonic time, deleted?), and when changes may
        # have been missed (the listener was down).
        self._recent_changes: dict[int, tuple[float, bool]] = {}
        self._changes_missed_at = float("-inf")
        self._left_out: set[str] = set()  # keys of the targets the last claim left out
        self._stale: list[ClaimedDelivery] = []  # held, not started: to give back unsent
        # Wakes the claim loop: new deliveries committed (wakeup), room freed, a record, stop.
        self._wake_claim_loop = asyncio.Event()
        self.recorder = Recorder(self.queue, on_recorded=lambda: self._wake_claim_loop.set())
        timeout = settings.delivery_timeout_seconds
        self.senders = SenderPool(
            dispatcher=self._dispatcher,
            recorder=self.recorder,
            sender=sender
            or Sender(
                allowed_networks=settings.webhook_allowed_networks,
                allow_http=settings.is_sandbox,
                timeout=timeout,
                max_connections=concurrency + max_slow,
            ),
            retries=RetryPolicy.from_settings(settings),
            concurrency=concurrency,
            max_slow_attempts=max_slow,
            slow_after=settings.delivery_slow_after_seconds,
            start_by=lambda d: start_by(
                d.lease_until, timeout=timeout, lease_seconds=settings.delivery_lease_seconds
            ),
            on_done=self._on_done,
            on_stale=self._give_back_later,
            on_slow=self._wake_claim_loop_now,
        )

    # --- main loop -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set, then finish what is in flight (releasing what has not
        started) and record every outcome before returning."""
        self._wake_claim_loop = wakeup.waiter()
        webhook_changes.listen(self._on_webhook_change)
        stopping = asyncio.create_task(self._wake_claim_loop_when_set(stop), name="delivery-stop")
        recording = asyncio.Event()
        recorder = asyncio.create_task(
            self.recorder.record_until(recording), name="delivery-recorder"
        )
        watch = self.senders.start()
        listener = asyncio.create_task(
            listen_for_notifications(self.database.url, stop), name="delivery-listener"
        )
        # What the queue's back end runs beside the worker (the relay, on NATS), woken as the
        # claim loop is when deliveries are committed.
        due = wakeup.waiter()
        beside = asyncio.create_task(self.queue.serve(stop, due), name="delivery-queue")
        log.info("delivery_worker_started", concurrency=self.senders.concurrency)
        try:
            while not stop.is_set():
                self._wake_claim_loop.clear()
                await self._give_back_stale()
                room = self._room_to_claim()
                # Claim in batches: with work in hand, wait until a good share of the room is
                # free rather than run one claim transaction per finished delivery.
                if room >= self._claim_batch or (room > 0 and not self._held()):
                    await self._claim(room)
                    if self._more_due and self._room_to_claim() >= self._claim_batch:
                        continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._wake_claim_loop.wait(), self.settings.delivery_poll_interval_seconds
                    )
        finally:
            wakeup.forget(self._wake_claim_loop)
            webhook_changes.forget(self._on_webhook_change)
            stopping.cancel()
            watch.cancel()
            await self._drain()
            recording.set()
            self.recorder.wake()
            await recorder
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            if not stop.is_set():  # the loop failed: its relay stops with it
                beside.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beside
            wakeup.forget(due)
            await self.senders.sender.close()
            await self.queue.close()
            log.info("delivery_worker_stopped")

    async def _wake_claim_loop_when_set(self, event: asyncio.Event) -> None:
        await event.wait()
        self._wake_claim_loop.set()

    def _wake_claim_loop_now(self) -> None:
        self._wake_claim_loop.set()

    def _held(self) -> int:
        return self._dispatcher.waiting + self._dispatcher.running

    def _room_to_claim(self) -> int:
        held = self._held()
        concurrency = self.senders.concurrency
        # What is held for slow hosts waits on them, not on the pool: it does not count against
        # the prefetch, only against a bound on everything held.
        for_the_pool = held - self._dispatcher.held_for_slow_targets()
        return min(
            PREFETCH * concurrency - for_the_pool,
            (PREFETCH + SLOW_ATTEMPTS_PER_SENDER) * concurrency - held,
        )

    # --- claiming ------------------------------------------------------------------------------

    async def _claim(self, room: int) -> None:
        dispatcher = self._dispatcher
        started = time.monotonic()
        if started < self._claims_paused_until or self.recorder.unrecorded:
            # Nothing claimed, so nothing known to be due: the loop waits for the poll (or the
            # record's wake-up) instead of coming straight back here.
            self._more_due = False
            return
        full = [
            t
            for t in dispatcher.targets.values()
            if dispatcher.held(t) >= (dispatcher.per_target if t.slow else self._enough_per_target)
        ]
        self._left_out = {target.key for target in full}
        try:
            if self.secret_store is None:
                self.secret_store = await load_secret_store(self.settings, self.database)
            claim = await self.queue.claim(
                secret_store=self.secret_store,
                limit=room,
                lease=self.lease,
                exclude_webhooks=[webhook_id for t in full for webhook_id in t.webhook_ids],
                exclude_hosts=[t.key for t in full],
            )
        except Exception as exc:
            self._claim_failed(exc)
            return
        if self._claim_failures:
            log.info("delivery_claims_resumed", failuresInARow=self._claim_failures)
            self._claim_failures = 0
        self._more_due = claim.more_due
        for webhook_id, (changed_at, _) in list(self._recent_changes.items()):
            if changed_at < started - CHANGES_KEPT_SECONDS:
                del self._recent_changes[webhook_id]
        any_missed = self._changes_missed_at >= started
        for delivery in claim.deliveries:
            change = self._recent_changes.get(delivery.webhook_id)
            if change is not None and change[0] >= started:
                self._drop([delivery], deleted=change[1])
            elif delivery.target_url is None:  # the webhook was deleted, and its delivery with it
                continue
            elif any_missed:
                self._drop([delivery], deleted=False)
            else:
                dispatcher.add(delivery, delivery.target_url)

    def _claim_failed(self, exc: Exception) -> None:
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

    def _on_done(self, target: Target) -> None:
        """One of `target`'s deliveries is done: claim again when that made room and there may
        be more due (the last claim was full, or it left out this target, which has now fallen
        below the mark). Otherwise new deliveries announce themselves, and retries are polled
        for."""
        if (
            self._more_due
            or (
                target.key in self._left_out
                and self._dispatcher.held(target) < self._enough_per_target
            )
        ) and self._room_to_claim() >= self._claim_batch:
            self._wake_claim_loop.set()

    # --- webhook changes and giving back ---------------------------------------------------------

    def _on_webhook_change(self, change: WebhookChange | None) -> None:
        """A webhook changed or was deleted: what this worker holds for it carries the old URL,
        secret or state. Deliveries not started yet go back to the queue, to be claimed again
        with what the webhook is now (or, deleted, are recorded as cancelled). None: changes
        may have been missed (the listener was down), so that goes for everything held."""
        if change is None:
            self._changes_missed_at = time.monotonic()
            self._drop(self._dispatcher.take_waiting(), deleted=False)
            return
        self._recent_changes[change.webhook_id] = (time.monotonic(), change.deleted)
        self._drop(self._dispatcher.take_webhook(change.webhook_id), deleted=change.deleted)

    def _drop(self, deliveries: list[ClaimedDelivery], *, deleted: bool) -> None:
        """Stop holding `deliveries`: give them back to the queue unsent (or, their webhook
        deleted under this worker's lease, record them as cancelled)."""
        if not deliveries:
            return
        if deleted:
            now = clock.now()
            # Under this worker's lease, the deletion left them to it. Past it (the worker was
            # paused), the deletion may have recorded them itself: given back, they are
            # recorded only if nobody has been since the claim (see QueueBackend.release).
            self._record_deleted([d for d in deliveries if d.lease_until > now])
            deliveries = [d for d in deliveries if d.lease_until <= now]
            if not deliveries:
                return
        self._stale += deliveries
        self._wake_claim_loop.set()

    def _give_back_later(self, delivery: ClaimedDelivery) -> None:
        self._stale.append(delivery)
        self._wake_claim_loop.set()

    def _record_deleted(self, deliveries: list[ClaimedDelivery]) -> None:
        """The last record of deliveries whose webhook was deleted before their attempt."""
        if deliveries:
            now = clock.now()
            self.recorder.add(not_sent(d, "the webhook was deleted", at=now) for d in deliveries)

    async def _give_back_stale(self) -> None:
        if self._stale:
            stale, self._stale = self._stale, []
            await self._release(stale, due_in=timedelta(0))

    async def _release(self, claims: list[ClaimedDelivery], *, due_in: timedelta) -> None:
        # Tried again after a lost connection (one the listener's loss often comes with): what
        # is not given back waits out its lease unsent.
        for pause in (*RELEASE_RETRY_PAUSES, None):
            try:
                cancelled = await self.queue.release(
                    claims, due_at=clock.now() + due_in, lease=self.lease
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
        await self.senders.wait_finished(self.settings.delivery_timeout_seconds + 5)
        await self._give_back_stale()
