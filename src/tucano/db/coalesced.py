"""Point lookups that share statements under load."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import (
    Awaitable,
    Callable,
    Hashable,
    Mapping,
)
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CoalescedLookup(Generic[K, V]):
    """Point lookups by key that share statements under load: while `max_in_flight` statements
    run, the keys asked for meanwhile wait and go together in the next one (at most `max_batch`
    keys). A lone lookup runs at once, as a statement of its own.

    Every statement starts after each of its lookups was asked for, so an answer is never older
    than its request: it sees every write committed before the request came. What this saves is
    the per-statement cost in this process (borrowing a connection, the protocol, the task
    switches), the largest part of a read's CPU beyond the route itself.
    """

    def __init__(
        self,
        fetch_many: Callable[[list[K]], Awaitable[Mapping[K, V]]],
        *,
        max_in_flight: int,
        max_batch: int = 64,
    ) -> None:
        self._fetch_many = fetch_many
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._in_flight = 0
        self._waiting: list[tuple[K, asyncio.Future[V | None]]] = []
        self._batches: set[asyncio.Task[None]] = set()  # a reference, so none is collected

    async def get(self, key: K) -> V | None:
        """The value of `key`, or None if there is none."""
        if self._in_flight < self._max_in_flight and not self._waiting:
            self._in_flight += 1
            try:
                return (await self._fetch_many([key])).get(key)
            finally:
                self._in_flight -= 1
                self._start_waiting()
        future: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, future))
        return await future

    def _start_waiting(self) -> None:
        while self._waiting and self._in_flight < self._max_in_flight:
            batch = self._waiting[: self._max_batch]
            del self._waiting[: self._max_batch]
            self._in_flight += 1
            # A context of its own: not the one of whichever request's lookup ended last.
            task = asyncio.get_running_loop().create_task(
                self._run(batch), context=contextvars.Context()
            )
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    async def _run(self, batch: list[tuple[K, asyncio.Future[V | None]]]) -> None:
        try:
            # Those whose request went away (the client left) are not asked for.
            keys = list(dict.fromkeys(key for key, future in batch if not future.done()))
            found = await self._fetch_many(keys) if keys else {}
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    if isinstance(exc, asyncio.CancelledError):
                        future.cancel()
                    else:
                        future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for key, future in batch:
                if not future.done():
                    future.set_result(found.get(key))
        finally:
            self._in_flight -= 1
            self._start_waiting()
