"""A real HTTP receiver on a loopback port, standing in for a merchant's webhook endpoint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()


Behaviour = Callable[[Received, int], Awaitable[web.StreamResponse]]


async def answer(status: int = 200, body: str = "ok", **headers: str) -> web.StreamResponse:
    return web.Response(status=status, text=body, headers=headers)


def always(status: int = 200, body: str = "ok", **headers: str) -> Behaviour:
    async def behave(_request: Received, _nth: int) -> web.StreamResponse:
        return await answer(status, body, **headers)

    return behave


def failing_then_ok(failures: int, status: int = 500, **headers: str) -> Behaviour:
    async def behave(_request: Received, nth: int) -> web.StreamResponse:
        return await answer(status if nth <= failures else 200, **headers)

    return behave


def hanging(seconds: float) -> Behaviour:
    async def behave(_request: Received, _nth: int) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return await answer(200)

    return behave


@dataclass
class Receiver:
    """Records every request; answers per path with a Behaviour (200 "ok" by default)."""

    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    base_url: str = ""
    # Requests being answered right now, and the most there ever were at once, per path.
    open_now: dict[str, int] = field(default_factory=dict)
    most_open: dict[str, int] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def start(self) -> Receiver:
        app = web.Application(client_max_size=10 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def url(self, path: str) -> str:
        return self.base_url + path

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        received = Received(
            path=request.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=await request.read(),
            at=time.monotonic(),
        )
        async with self._arrived:
            self.received.append(received)
            nth = sum(1 for r in self.received if r.path == received.path)
            self._arrived.notify_all()
        behaviour = self.behaviours.get(request.path, always())
        path = request.path
        self.open_now[path] = self.open_now.get(path, 0) + 1
        self.most_open[path] = max(self.most_open.get(path, 0), self.open_now[path])
        try:
            return await behaviour(received, nth)
        finally:
            self.open_now[path] -= 1

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def wait_for(self, path: str, count: int, timeout: float = 15) -> list[Received]:
        """Wait until `count` requests reached `path` (fails the test after `timeout`)."""

        async def arrived() -> None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: len(self.at(path)) >= count)

        try:
            await asyncio.wait_for(arrived(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"{path}: {len(self.at(path))} of {count} requests after {timeout}s"
            ) from None
        return self.at(path)
