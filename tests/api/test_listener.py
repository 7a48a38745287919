"""The event loop of `tucano serve` accepts every waiting connection in one turn
(api/listener.py)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tucano.api import listener
from tucano.api.listener import BatchAcceptLoop, BatchAcceptServer, new_event_loop
from tucano.cli.processes import EVENT_LOOP


class Echo(asyncio.Protocol):
    made: list[Echo] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        Echo.made.append(self)

    def data_received(self, data: bytes) -> None:
        self.transport.write(data.upper())  # type: ignore[attr-defined]


def run(work: Callable[[], Awaitable[Any]]) -> Any:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(work())


async def serve_echo(backlog: int = 100) -> BatchAcceptServer:
    Echo.made = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", 0, backlog=backlog)
    assert isinstance(server, BatchAcceptServer)
    return server


def connect_clients(server: BatchAcceptServer, count: int) -> list[socket.socket]:
    """Connected in the kernel (handshake done) but not yet accepted by the server."""
    address = server.sockets[0].getsockname()
    return [socket.create_connection(address) for _ in range(count)]


def test_tucano_serve_runs_on_this_loop() -> None:
    module, _, name = EVENT_LOOP.partition(":")
    assert module == listener.__name__
    assert isinstance(getattr(listener, name)(), BatchAcceptLoop)


def test_every_waiting_connection_is_accepted_in_one_turn() -> None:
    async def work() -> tuple[int, int, list[bytes]]:
        server = await serve_echo()
        clients = connect_clients(server, 40)
        accepted = server.accept_waiting(server.sockets[0])  # one turn's worth
        await asyncio.sleep(0.05)
        answers = []
        for client in clients:
            client.sendall(b"ping")
            answers.append(await asyncio.get_running_loop().sock_recv(client, 10))
            client.close()
        server.close()
        return accepted, len(Echo.made), answers

    # (sock_recv needs a non-blocking socket)
    accepted, made, answers = run(_nonblocking_clients(work))
    assert accepted == 40
    assert made == 40
    assert answers == [b"PING"] * 40


def _nonblocking_clients(
    work: Callable[[], Awaitable[Any]],
) -> Callable[[], Awaitable[Any]]:
    original = socket.create_connection

    def create_connection(address: Any) -> socket.socket:
        client = original(address)
        client.setblocking(False)
        return client

    async def wrapped() -> Any:
        socket.create_connection = create_connection  # type: ignore[assignment]
        try:
            return await work()
        finally:
            socket.create_connection = original

    return wrapped


def test_a_turn_accepts_at_most_the_backlog() -> None:
    async def work() -> tuple[int, int]:
        server = await serve_echo(backlog=5)
        clients = connect_clients(server, 6)  # what the kernel holds for a backlog of 5
        first = server.accept_waiting(server.sockets[0])
        second = server.accept_waiting(server.sockets[0])
        for client in clients:
            client.close()
        server.close()
        return first, second

    assert run(work) == (5, 1)


def test_closing_stops_listening() -> None:
    async def work() -> tuple[int, bool]:
        server = await serve_echo()
        address = server.sockets[0].getsockname()
        server.close()
        await server.wait_closed()
        return address, server.is_serving()

    address, serving = run(work)
    assert not serving
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=2)


def test_out_of_file_descriptors_pauses_accepting_then_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listener, "_ACCEPT_RETRY_SECONDS", 0.05)

    class Exhausted(socket.socket):
        def accept(self) -> tuple[socket.socket, Any]:
            raise OSError(errno.EMFILE, "Too many open files")

    async def work() -> tuple[int, int]:
        server = await serve_echo()
        real = server.sockets[0]
        fake = Exhausted(fileno=os.dup(real.fileno()))
        refused = server.accept_waiting(fake)
        fake.close()
        clients = connect_clients(server, 3)
        await asyncio.sleep(0.3)  # the retry re-arms the reader; the waiting three get in
        for client in clients:
            client.close()
        server.close()
        return refused, len(Echo.made)

    assert run(work) == (0, 3)


def test_connections_leave_no_descriptor_behind() -> None:
    async def work() -> tuple[int, int]:
        server = await serve_echo()
        before = 0
        for round_ in range(6):
            if round_ == 1:  # after the first: the loop's own descriptors are open by then
                before = len(os.listdir("/proc/self/fd"))
            clients = connect_clients(server, 20)
            await asyncio.sleep(0.05)
            for client in clients:
                client.close()
            await asyncio.sleep(0.05)
        after = len(os.listdir("/proc/self/fd"))
        server.close()
        return before, after

    before, after = run(work)
    assert len(Echo.made) == 120
    assert after <= before


def test_an_address_in_use_fails_to_bind() -> None:
    async def work() -> None:
        server = await serve_echo()
        port = server.sockets[0].getsockname()[1]
        try:
            await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", port)
        finally:
            server.close()

    with pytest.raises(OSError, match="address"):
        run(work)
