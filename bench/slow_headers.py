"""Connections that never finish their headers, held open against a server while normal requests
arrive on fresh connections: what `bench/servers.py` measures besides throughput."""

from __future__ import annotations

import asyncio
import errno
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Half a request: the header block is never ended, so only a header timeout frees the socket.
PARTIAL = b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Slow: "
NORMAL = b"GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
NORMAL_EVERY_SECONDS = 0.1
NORMAL_TIMEOUT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 5.0
OPENING_AT_ONCE = 1000  # connects in flight while opening the slow sockets
# A server that stops accepting makes each connect wait out its timeout: give up on the rest.
OPENING_SECONDS = 15.0


@dataclass
class SlowReport:
    asked: int
    opened: int = 0
    open_failures: Counter[str] = field(default_factory=Counter)
    # (sent its partial header, closed by the server) of each socket the server closed.
    closings: list[tuple[float, float]] = field(default_factory=list)
    window_ended: float = float("inf")
    # What the server sent a slow socket before closing it: "408", or "closed unanswered".
    answers_to_slow: Counter[str] = field(default_factory=Counter)
    normal_ms: list[float] = field(default_factory=list)  # of normal requests answered 200
    normal_failures: Counter[str] = field(default_factory=Counter)
    log_lines: list[str] = field(default_factory=list)  # what the server logged meanwhile
    server_exit: int | None = None  # the server's exit status, if it died

    @property
    def closed_after(self) -> list[float]:
        """Seconds from the partial header to the close, of sockets closed within the window."""
        return sorted(end - sent for sent, end in self.closings if end <= self.window_ended)


def failure_name(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionResetError):
        return "reset"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, OSError) and exc.errno is not None and exc.errno in errno.errorcode:
        # EMFILE here is the benchmark's own limit, not the server's.
        return errno.errorcode[exc.errno]
    return type(exc).__name__


def status_of(head: bytes) -> str:
    """The status code of a response's first bytes, or what came instead."""
    if not head:
        return "closed unanswered"
    parts = head.split(b" ", 2)
    return parts[1].decode() if head.startswith(b"HTTP/") and len(parts) > 1 else "garbage"


class SlowSockets:
    """`count` sockets, each sent PARTIAL and then nothing, watched until the server closes them."""

    def __init__(self, host: str, port: int, report: SlowReport) -> None:
        self.host, self.port, self.report = host, port, report
        self.writers: list[asyncio.StreamWriter] = []
        self.watchers: list[asyncio.Task[None]] = []

    async def open(self, count: int) -> None:
        gate = asyncio.Semaphore(OPENING_AT_ONCE)
        give_up_at = time.monotonic() + OPENING_SECONDS

        async def open_one() -> None:
            async with gate:
                if time.monotonic() > give_up_at:
                    self.report.open_failures["not tried"] += 1
                    return
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                        reader, writer = await asyncio.open_connection(self.host, self.port)
                        writer.write(PARTIAL)
                        await writer.drain()
                except Exception as exc:
                    self.report.open_failures[failure_name(exc)] += 1
                    return
            self.report.opened += 1
            self.writers.append(writer)
            self.watchers.append(asyncio.create_task(self.watch(reader, time.monotonic())))

        await asyncio.gather(*(open_one() for _ in range(count)))

    async def watch(self, reader: asyncio.StreamReader, sent_at: float) -> None:
        """Wait for the server to close the socket; note when, and what it answered first."""
        head = b""
        try:
            while chunk := await reader.read(4096):
                head = head or chunk
        except OSError:
            pass
        self.report.closings.append((sent_at, time.monotonic()))
        self.report.answers_to_slow[status_of(head)] += 1

    async def close(self) -> None:
        for watcher in self.watchers:
            watcher.cancel()
        await asyncio.gather(*self.watchers, return_exceptions=True)
        for writer in self.writers:
            writer.close()


async def normal_request(host: str, port: int, report: SlowReport) -> None:
    """One request on a fresh connection, given NORMAL_TIMEOUT_SECONDS in all."""
    started = time.perf_counter()
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(NORMAL_TIMEOUT_SECONDS):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(NORMAL)
            answer = await reader.read()  # the server closes after it (Connection: close)
    except Exception as exc:
        report.normal_failures[failure_name(exc)] += 1
        return
    finally:
        if writer is not None:
            writer.close()
    status = status_of(answer)
    if status == "200":
        report.normal_ms.append((time.perf_counter() - started) * 1000)
    else:
        report.normal_failures[status] += 1


def lines_since(log_path: Path, offset: int) -> list[str]:
    with log_path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace").splitlines()


async def hold_slow_sockets(
    host: str, port: int, *, count: int, seconds: float, log_path: Path
) -> SlowReport:
    """Open `count` slow sockets, then for `seconds` send a normal request every 100 ms."""
    report = SlowReport(asked=count)
    logged_before = await asyncio.to_thread(lambda: log_path.stat().st_size)
    slow = SlowSockets(host, port, report)
    await slow.open(count)
    window_ends = time.monotonic() + seconds
    requests: list[asyncio.Task[None]] = []
    while time.monotonic() < window_ends:
        requests.append(asyncio.create_task(normal_request(host, port, report)))
        await asyncio.sleep(NORMAL_EVERY_SECONDS)
    report.window_ended = time.monotonic()
    await asyncio.gather(*requests)
    report.log_lines = await asyncio.to_thread(lines_since, log_path, logged_before)
    await slow.close()
    return report
