"""The HTTP server's bounds on connections: headers must arrive in time, and the open connections
are capped with the slowest giving way (api/connections.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from structlog.testing import capture_logs

from tests.support.processes import clean_env, start_serve
from tucano.api.connections import ConnectionLimits, guarded_http_protocol
from tucano.cli.processes import connection_limits
from tucano.config import Settings

PARTIAL_REQUEST = b"GET / HTTP/1.1\r\nHost: tucano\r\nX-Slow: "
REQUEST = b"GET / HTTP/1.1\r\nHost: tucano\r\n\r\n"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class App:
    """Answers 200 at once, or (at /slow) when `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = 0  # requests at /slow, waiting for `release`

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/slow":
            self.waiting += 1
            await self.release.wait()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def guarded_server(
    header_timeout: float, max_connections: int, report_every: float = 10
) -> AsyncIterator[tuple[int, App]]:
    app = App()
    limits = ConnectionLimits(
        header_timeout_seconds=header_timeout, max_connections=max_connections
    )
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        http=guarded_http_protocol(limits, report_interval=report_every),
        log_config=None,
        access_log=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1], app
    finally:
        app.release.set()
        server.should_exit = True
        await task


async def open_slow(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(PARTIAL_REQUEST)
    await writer.drain()
    return reader, writer


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """True if the server closed the connection (EOF or reset) within `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(4096):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


async def answered(port: int, path: str = "/") -> int:
    async with httpx.AsyncClient(timeout=5) as http:
        return (await http.get(f"http://127.0.0.1:{port}{path}")).status_code


async def test_headers_that_do_not_arrive_in_time_close_the_connection() -> None:
    async with guarded_server(header_timeout=0.5, max_connections=100) as (port, _):
        silent_reader, silent = await asyncio.open_connection("127.0.0.1", port)
        partial_reader, partial = await open_slow(port)
        started = time.monotonic()
        assert await closed_within(partial_reader, 3)
        assert await closed_within(silent_reader, 3)
        assert 0.4 < time.monotonic() - started < 2.5
        assert await answered(port) == 200
        silent.close()
        partial.close()


async def test_the_next_request_on_a_kept_alive_connection_has_the_same_deadline() -> None:
    async with guarded_server(header_timeout=0.5, max_connections=100) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        assert await reader.readexactly(2) == b"ok"
        writer.write(PARTIAL_REQUEST)  # the next request, whose headers never end
        assert await closed_within(reader, 3)
        writer.close()


async def test_headers_that_arrive_in_time_are_answered_however_slowly_they_came() -> None:
    async with guarded_server(header_timeout=1.0, max_connections=100) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for line in REQUEST.split(b"\r\n")[:-1]:
            writer.write(line + b"\r\n")
            await asyncio.sleep(0.2)
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.close()


async def test_headers_that_go_on_and_on_are_a_431_before_their_deadline() -> None:
    async with guarded_server(header_timeout=30, max_connections=100) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PARTIAL_REQUEST)
        with contextlib.suppress(ConnectionError):
            for _ in range(200):  # 200 KiB of one header, never ended
                writer.write(b"x" * 1024)
                await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 431")
        assert json.loads(await reader.read())["errorCode"] == 49
        writer.close()


async def test_a_large_body_sent_with_its_headers_at_once_is_not_taken_for_headers() -> None:
    async with guarded_server(header_timeout=30, max_connections=100) as (port, _):
        async with httpx.AsyncClient(timeout=5) as http:
            answer = await http.post(f"http://127.0.0.1:{port}/", content=b"x" * 500_000)
        assert answer.status_code == 200


async def test_many_slow_connections_do_not_keep_a_normal_request_out() -> None:
    async with guarded_server(header_timeout=30, max_connections=50) as (port, _):
        slow = [await open_slow(port) for _ in range(200)]
        # Far within the header timeout: the slow connections gave way to the newer ones.
        started = time.monotonic()
        assert await answered(port) == 200
        assert time.monotonic() - started < 2
        still_open = [not await closed_within(reader, 0.01) for reader, _ in slow]
        assert sum(still_open) <= 50
        assert still_open[-1]  # the oldest gave way, not the newest
        for _, writer in slow:
            writer.close()


async def test_at_the_cap_with_every_connection_busy_a_new_one_is_told_to_retry() -> None:
    async with guarded_server(header_timeout=30, max_connections=3) as (port, app):
        busy = [asyncio.create_task(answered(port, "/slow")) for _ in range(3)]
        while app.waiting < 3:  # noqa: ASYNC110 (every connection is now mid-request)
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503")
        assert b"retry-after: 1" in head
        body = json.loads(await reader.read())
        assert body["errorCode"] == 2
        assert set(body) == {"errorCode", "message", "timestamp", "xTransactionId", "errors"}
        writer.close()
        app.release.set()
        assert await asyncio.gather(*busy) == [200, 200, 200]
        assert await answered(port) == 200  # busy connections, once done, make room again


async def test_hitting_a_limit_is_logged_at_once_then_summed_per_interval() -> None:
    with capture_logs() as logs:
        async with guarded_server(header_timeout=0.3, max_connections=5, report_every=0.5) as (
            port,
            _,
        ):
            slow = [await open_slow(port) for _ in range(20)]
            await asyncio.sleep(1.5)
            for _, writer in slow:
                writer.close()
    lines = [line for line in logs if line["event"] == "connection_limit_hit"]
    # 15 gave way to newer ones and the last 5 timed out: a few lines, not twenty.
    assert 2 <= len(lines) <= 3, lines
    assert lines[0]["gaveWayToNewer"] >= 1  # the first is logged at once
    assert sum(line["gaveWayToNewer"] for line in lines) == 15
    assert sum(line["headersTimedOut"] for line in lines) == 5
    assert all(line["log_level"] == "warning" for line in lines)


def test_the_cap_stays_under_the_open_files_limit() -> None:
    settings = Settings(max_connections=5000, header_timeout_seconds=3)
    assert connection_limits(settings, open_files=20000) == ConnectionLimits(3, 5000)
    assert connection_limits(settings, open_files=1024).max_connections == 512


def test_tucano_serve_closes_slow_connections_logs_it_and_keeps_answering(
    tmp_path: Path,
) -> None:
    env = clean_env(
        TUCANO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tucano.db'}",
        TUCANO_HEADER_TIMEOUT_SECONDS="1",
        TUCANO_MAX_CONNECTIONS="50",
        TUCANO_LOG_FORMAT="json",
    )
    server = start_serve(tmp_path, env, "--no-worker")
    port = int(server.base_url.rsplit(":", 1)[1])

    async def attack() -> tuple[int, float, int]:
        slow = [await open_slow(port) for _ in range(300)]
        started = time.monotonic()
        status = await answered(port, "/health/live")
        took = time.monotonic() - started
        closed = sum(await asyncio.gather(*(closed_within(r, 5) for r, _ in slow)))
        for _, writer in slow:
            writer.close()
        return status, took, closed

    try:
        status, took, closed = asyncio.run(attack())
        assert status == 200
        assert took < 1  # answered before any header timeout: slow connections gave way
        assert closed == 300  # every slow connection closed: gave way, or timed out
        logs = server.wait_for_log("connection_limit_hit")
        line = next(json.loads(x) for x in logs.splitlines() if "connection_limit_hit" in x)
        assert line["level"] == "warning"
        assert line["gaveWayToNewer"] + line["headersTimedOut"] > 0
        assert line["maxConnections"] == 50
    finally:
        server.stop()
