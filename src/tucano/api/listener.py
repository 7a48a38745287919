"""The event loop `tucano serve` runs on: uvloop, accepting every waiting connection at once.

libuv (under uvloop) accepts one connection per turn of the event loop. On a busy server a turn
takes as long as the requests it runs, so a burst of new connections is let in one turn at a
time, and the last of 64 waited a second and more before its first request was even read
(bench.api at 64 connections). asyncio's own loop accepts up to its
backlog per turn, but delivers webhooks at a quarter more CPU per attempt than uvloop. So this
loop is uvloop with the listening socket watched here: each time it is readable, every
connection waiting on it is accepted and handed to uvloop as an accepted socket.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable, Iterable
from typing import Any

import structlog
import uvloop

log = structlog.get_logger("tucano.listener")

# Out of file descriptors or memory: accepting again at once would fail again at once.
_ACCEPT_RETRY_SECONDS = 1.0
_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class BatchAcceptServer:
    """The part of `asyncio.Server` uvicorn uses, over listening sockets read by this process:
    each turn accepts up to `backlog` connections from each ready socket."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        listeners: list[socket.socket],
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        backlog: int,
    ) -> None:
        self._loop = loop
        self.sockets = listeners
        self._protocol_factory = protocol_factory
        self._backlog = max(1, backlog)
        self._serving = False
        self._connecting: set[asyncio.Task[Any]] = set()
        self._start_serving()

    def _start_serving(self) -> None:
        self._serving = True
        for listener in self.sockets:
            self._loop.add_reader(listener.fileno(), self.accept_waiting, listener)

    def accept_waiting(self, listener: socket.socket) -> int:
        """Accept the connections waiting on `listener` (at most the backlog); how many."""
        accepted = 0
        while accepted < self._backlog:
            try:
                connection, _ = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                break  # none left, or one that the client gave up on before it was accepted
            except OSError as exc:
                if exc.errno not in _RESOURCE_ERRORS:
                    raise
                log.warning(
                    "accept_paused",
                    error=errno.errorcode.get(exc.errno or 0, str(exc.errno)),
                    retryInSeconds=_ACCEPT_RETRY_SECONDS,
                    hint="the process is out of file descriptors or memory",
                )
                self._pause(_ACCEPT_RETRY_SECONDS)
                break
            accepted += 1
            connection.setblocking(False)
            task = self._loop.create_task(self._hand_over(connection))
            self._connecting.add(task)
            task.add_done_callback(self._connecting.discard)
        return accepted

    async def _hand_over(self, connection: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._protocol_factory, connection)
        except OSError:
            connection.close()  # the client went away while it was being set up

    def _pause(self, seconds: float) -> None:
        for listener in self.sockets:
            self._loop.remove_reader(listener.fileno())
        self._loop.call_later(seconds, self._resume)

    def _resume(self) -> None:
        if self._serving:
            self._start_serving()

    def is_serving(self) -> bool:
        return self._serving

    def close(self) -> None:
        if not self._serving:
            return
        self._serving = False
        for listener in self.sockets:
            self._loop.remove_reader(listener.fileno())
            listener.close()

    async def wait_closed(self) -> None:
        if self._connecting:
            await asyncio.gather(*self._connecting, return_exceptions=True)


def _listening_sockets(
    infos: Iterable[tuple[Any, ...]], backlog: int, reuse_port: bool
) -> list[socket.socket]:
    listeners: list[socket.socket] = []
    try:
        for family, kind, protocol, _, address in infos:
            listener = socket.socket(family, kind, protocol)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                # One socket per address family, as asyncio binds them.
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                listener.bind(address)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {address!r}: {exc}"
                ) from None
            listener.listen(backlog)
            listener.setblocking(False)
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    return listeners


class BatchAcceptLoop(uvloop.Loop):
    """uvloop, whose plain TCP servers are BatchAcceptServers (TLS ones are uvloop's own)."""

    async def create_server(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        *,
        sock: socket.socket | None = None,
        backlog: int = 100,
        ssl: Any = None,
        reuse_port: bool | None = None,
        **options: Any,
    ) -> Any:
        if ssl is not None or options:
            uvloop_server: Any = super().create_server  # (its stubs know only host or sock)
            return await uvloop_server(
                protocol_factory,
                host,
                port,
                sock=sock,
                backlog=backlog,
                ssl=ssl,
                reuse_port=reuse_port,
                **options,
            )
        if sock is not None:
            sock.setblocking(False)
            sock.listen(backlog)
            listeners = [sock]
        else:
            infos = await self.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            listeners = _listening_sockets(set(infos), backlog, bool(reuse_port))
        return BatchAcceptServer(self, listeners, protocol_factory, backlog)


def new_event_loop() -> BatchAcceptLoop:
    """The loop factory uvicorn is given (`loop="tucano.api.listener:new_event_loop"`)."""
    return BatchAcceptLoop()
