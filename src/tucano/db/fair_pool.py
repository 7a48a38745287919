"""A connection pool that hands connections out in the order requests asked for them.

SQLAlchemy's asyncio pool queues on an `asyncio.Queue`, which lets a newcomer take a connection
that has just been returned while earlier requests are still waking up to take it; a request
that loses that race goes to the back of the line again. Under load a few requests lose it over
and over (docs/performance.md, "The tail at 64 connections"). Here a returned connection goes
straight to the request that has waited longest, and nobody takes one while others wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from sqlalchemy.pool import AsyncAdaptedQueuePool
from sqlalchemy.util import memoized_property
from sqlalchemy.util.queue import AsyncAdaptedQueue


class FirstComeQueue:
    """The part of `asyncio.Queue` SQLAlchemy's pool uses, first come first served: an item put
    while getters wait is handed to the first of them, so items wait only when no getter does."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: deque[Any] = deque()
        self._getters: deque[asyncio.Future[Any]] = deque()

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._items)

    def qsize(self) -> int:
        return len(self._items)

    def put_nowait(self, item: Any) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():  # (a getter that timed out is still in line, cancelled)
                getter.set_result(item)
                return
        if self.full():
            raise asyncio.QueueFull
        self._items.append(item)

    async def put(self, item: Any) -> None:
        self.put_nowait(item)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    async def get(self) -> Any:
        if self._items:
            return self._items.popleft()
        getter = asyncio.get_running_loop().create_future()
        self._getters.append(getter)
        try:
            return await getter
        except BaseException:
            if getter.done() and not getter.cancelled():
                # Handed an item, then cancelled (a timeout) before taking it: pass it on.
                self.put_nowait(getter.result())
            else:
                getter.cancel()
            raise


class FirstComeAdaptedQueue(AsyncAdaptedQueue[Any]):
    @memoized_property
    def _queue(self) -> FirstComeQueue:  # type: ignore[override]
        # Made on first use, inside the running loop (as SQLAlchemy's own).
        return FirstComeQueue(self.maxsize)


class FirstComePool(AsyncAdaptedQueuePool):
    """SQLAlchemy's asyncio pool, with connections handed out first come first served."""

    _queue_class = FirstComeAdaptedQueue
