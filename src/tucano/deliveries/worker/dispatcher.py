"""The fair scheduler: claimed deliveries grouped by receiving host, handed to senders host by
host in turn, never more than a cap at once to one host (so a host that hangs holds only its own
share of the senders). A host whose attempts run slow is counted apart (see loop.py)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tucano.deliveries.queue.backend import ClaimedDelivery


def target_key(url: str) -> str:
    """The host a URL is sent to, as the dispatcher and claims know it: scheme and authority."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass(eq=False)
class Target:
    """One receiving host: claimed deliveries waiting for it, and how many are being sent."""

    key: str
    running: int = 0
    waiting: deque[ClaimedDelivery] = field(default_factory=deque)
    webhook_ids: set[int] = field(default_factory=set)
    in_turns: bool = False  # in the dispatcher's turn order
    slow: bool = False  # an attempt ran past the slow mark, and none has been quick since


class Dispatcher:
    """Claimed deliveries grouped by target, handed to senders target by target in turn."""

    def __init__(self, per_target: int) -> None:
        self.per_target = per_target
        self.targets: dict[str, Target] = {}
        self.waiting = 0  # claimed, not yet handed out
        self.running = 0  # handed out, not yet done
        self._turns: deque[Target] = deque()  # targets with waiting work and a free slot
        self.slow: set[Target] = set()
        # Kept as it changes: the worker asks after every delivery, and adding it up would
        # cost a pass over every slow target each time.
        self._held_for_slow = 0
        self._idle_senders: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def held(self, target: Target) -> int:
        return target.running + len(target.waiting)

    def held_for_slow_targets(self) -> int:
        return self._held_for_slow

    def mark_slow(self, target: Target) -> None:
        if not target.slow:
            target.slow = True
            self.slow.add(target)
            self._held_for_slow += self.held(target)

    def _unmark_slow(self, target: Target) -> None:
        if target.slow:
            target.slow = False
            self.slow.discard(target)
            self._held_for_slow -= self.held(target)

    def add(self, delivery: ClaimedDelivery, url: str) -> Target:
        key = target_key(url)
        target = self.targets.get(key)
        if target is None:
            target = self.targets[key] = Target(key)
        target.webhook_ids.add(delivery.webhook_id)
        target.waiting.append(delivery)
        self.waiting += 1
        if target.slow:
            self._held_for_slow += 1
        self._queue_turn(target)
        return target

    def _queue_turn(self, target: Target) -> None:
        """Put `target` in the turn order if it has work waiting and a free slot, waking one
        idle sender for it."""
        if not target.in_turns and target.waiting and target.running < self.per_target:
            target.in_turns = True
            self._turns.append(target)
            while self._idle_senders:
                idle = self._idle_senders.popleft()
                if not idle.done():
                    idle.set_result(None)
                    break

    async def next(self) -> tuple[ClaimedDelivery, Target] | None:
        """The next delivery to send, waiting for one if need be; None once closed."""
        while True:
            while not self._turns:
                if self._closed:
                    return None
                idle = asyncio.get_running_loop().create_future()
                self._idle_senders.append(idle)
                await idle
            target = self._turns.popleft()
            target.in_turns = False
            if target.waiting:  # (emptied meanwhile by take_webhook)
                break
        delivery = target.waiting.popleft()
        self.waiting -= 1
        target.running += 1
        self.running += 1
        self._queue_turn(target)  # its next delivery, if any, goes to the back of the line
        return delivery, target

    def done(self, target: Target, *, quick: bool) -> None:
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
            self._queue_turn(target)

    def _forget(self, target: Target) -> None:
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
            target.in_turns = False
        self.waiting = 0
        return taken

    def close(self) -> None:
        """Senders finish what they hold, then `next()` answers None."""
        self._closed = True
        while self._idle_senders:
            idle = self._idle_senders.popleft()
            if not idle.done():
                idle.set_result(None)
