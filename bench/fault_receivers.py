"""Webhook receivers for bench/faults.py, in one process: healthy ones that answer 200 at once and
remember each arrival by webhook-id, and misbehaving ones:

- hang: reads the request and never answers, holding the connection open;
- reset: reads the request and resets the connection (RST, no answer);
- slow: answers `HTTP/1.1 200 OK` and the rest, one byte a second;
- huge: answers 200 with a 100 MB body, written as fast as the client takes it.

The healthy ones run in a process of their own, apart from the misbehaving ones, so that the
100 MB being written does not delay the healthy ones' answers or the times they record.
`GET /_arrivals` on a healthy port hands over the healthy arrivals (and clears them),
`GET /_counts` on the huge port how many requests each misbehaving kind has been sent, and
`GET /_most_open` there the most connections each raw kind (hang, reset, slow) held open at once.

    python -m bench.fault_receivers healthy 2    # prints {"healthy": [ports]}
    python -m bench.fault_receivers misbehaving  # prints {"huge": port, "hang": port, ...}
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

HUGE_BYTES = 100 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)
SLOW_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
MISBEHAVING = ("hang", "reset", "slow", "huge")

# (webhook-id, arrival time, port) of each healthy delivery.
arrivals: list[tuple[str, float, int]] = []
counts: collections.Counter[str] = collections.Counter()
# Connections open now and at most at once, by kind (a worker's per-host cap bounds them).
open_now: collections.Counter[str] = collections.Counter()
most_open: collections.Counter[str] = collections.Counter()


async def healthy(request: web.Request) -> web.Response:
    await request.read()
    port = request.transport.get_extra_info("sockname")[1] if request.transport else 0
    arrivals.append((request.headers.get("webhook-id", ""), time.time(), port))
    return web.Response(text="ok")


async def huge(request: web.Request) -> web.StreamResponse:
    await request.read()
    counts["huge"] += 1
    response = web.StreamResponse(headers={"content-length": str(HUGE_BYTES)})
    await response.prepare(request)
    # One 1 MiB chunk written a hundred times: this process never holds the 100 MB either.
    with contextlib.suppress(ConnectionError, RuntimeError):
        for _ in range(HUGE_BYTES // len(CHUNK)):
            await response.write(CHUNK)
    return response


async def hand_over(_request: web.Request) -> web.Response:
    taken = list(arrivals)
    arrivals.clear()
    return web.json_response(taken)


async def tell_counts(_request: web.Request) -> web.Response:
    return web.json_response(dict(counts))


async def tell_most_open(_request: web.Request) -> web.Response:
    return web.json_response(dict(most_open))


async def read_request(reader: asyncio.StreamReader) -> bool:
    """One HTTP request, headers and body (by content-length); False once the client is gone."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return False
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    try:
        await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    return True


def raw_handler(
    kind: str,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        open_now[kind] += 1
        most_open[kind] = max(most_open[kind], open_now[kind])
        try:
            if not await read_request(reader):
                return
            counts[kind] += 1
            if kind == "hang":
                await reader.read()  # until the client gives up and closes
            elif kind == "reset":
                sock = writer.get_extra_info("socket")
                # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            else:
                for byte in SLOW_ANSWER:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(1)
        except ConnectionError:
            pass
        finally:
            open_now[kind] -= 1
            writer.close()

    return handle


async def serve(role: str, healthy_count: int) -> None:
    app = web.Application()
    app.router.add_get("/_arrivals", hand_over)
    app.router.add_get("/_counts", tell_counts)
    app.router.add_get("/_most_open", tell_most_open)
    app.router.add_post("/huge/{tail:.*}", huge)
    app.router.add_post("/{tail:.*}", healthy)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()

    async def site() -> int:
        started = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await started.start()
        return int(started._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    ports: dict[str, object] = {}
    servers = []
    if role == "healthy":
        ports["healthy"] = [await site() for _ in range(healthy_count)]
    else:
        ports["huge"] = await site()
        for kind in ("hang", "reset", "slow"):
            server = await asyncio.start_server(raw_handler(kind), "127.0.0.1", 0, backlog=1024)
            servers.append(server)
            ports[kind] = server.sockets[0].getsockname()[1]
    print(json.dumps(ports), flush=True)
    await asyncio.Event().wait()


class FaultReceivers:
    """The receivers' two processes, seen from the benchmark."""

    def __init__(self, healthy_count: int) -> None:
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.fault_receivers", *role],
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parent.parent,
            )
            for role in (("healthy", str(healthy_count)), ("misbehaving",))
        ]
        self.ports: dict[str, Any] = {}
        for process in self.processes:
            assert process.stdout is not None
            self.ports.update(json.loads(process.stdout.readline()))

    def healthy_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/hook" for port in self.ports["healthy"]]

    def misbehaving_urls(self) -> dict[str, str]:
        return {kind: f"http://127.0.0.1:{self.ports[kind]}/{kind}/hook" for kind in MISBEHAVING}

    async def arrivals(self, http: aiohttp.ClientSession) -> list[tuple[str, float, int]]:
        url = f"http://127.0.0.1:{self.ports['healthy'][0]}/_arrivals"
        async with http.get(url) as response:
            return [(i, t, p) for i, t, p in await response.json()]

    async def counts(self, http: aiohttp.ClientSession) -> dict[str, int]:
        async with http.get(f"http://127.0.0.1:{self.ports['huge']}/_counts") as response:
            return {str(k): int(v) for k, v in (await response.json()).items()}

    async def most_open(self, http: aiohttp.ClientSession) -> dict[str, int]:
        async with http.get(f"http://127.0.0.1:{self.ports['huge']}/_most_open") as response:
            return {str(k): int(v) for k, v in (await response.json()).items()}

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait()


def main() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    role = sys.argv[1] if len(sys.argv) > 1 else "healthy"
    asyncio.run(serve(role, int(sys.argv[2]) if len(sys.argv) > 2 else 2))


if __name__ == "__main__":
    main()
