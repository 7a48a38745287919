"""The HTTP server's guard on its connections (docs/security.md, "Slow and idle connections").

uvicorn bounds neither the time a client takes to send a request's headers nor the number of
connections it holds open: a client that opens sockets and sends half a header each keeps them
for ever, until the process runs out of file descriptors and every new client is reset. The
protocol here adds both bounds to uvicorn's own (httptools) protocol:

- a request's headers must be complete within `header_timeout_seconds` of the connection opening
  (or of the previous response on it ending), or the connection is closed; headers still
  unfinished after `MAX_UNFINISHED_HEADER_BYTES` are answered 431 and the connection closed
  (complete headers over the edge's own limit get its 431 with the error body);
- at most `max_connections` are open; at the cap, a new connection takes the place of the one
  that has waited longest for a request's headers, so slow clients cannot crowd out quick ones.
  Only when every open connection is in the middle of a request is the new one refused, with a
  503 the client can retry.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tucano.api.edge import MAX_REQUEST_HEADER_BYTES
from tucano.core import json_codec
from tucano.core.clock import clock, format_utc
from tucano.core.errors import ErrorCode

log = structlog.get_logger("tucano.connections")

MAX_UNFINISHED_HEADER_BYTES = 2 * MAX_REQUEST_HEADER_BYTES
LINGER_SECONDS = 2.0

# One line per this many seconds at most while a limit is being hit, with the counts since the
# last: a flood of slow clients must not become a flood of log lines.
REPORT_INTERVAL_SECONDS = 10.0


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_seconds: float
    max_connections: int


class LimitReport:
    """Counts the times each limit was hit and logs them: the first at once, then one warning
    line per interval at most, with the counts since the line before."""

    def __init__(self, limits: ConnectionLimits, *, interval: float = REPORT_INTERVAL_SECONDS):
        self.limits = limits
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.open_connections = 0
        self._last_report = float("-inf")
        self._scheduled: asyncio.TimerHandle | None = None

    def hit(self, kind: str, loop: asyncio.AbstractEventLoop, open_connections: int) -> None:
        self.counts[kind] += 1
        self.open_connections = open_connections
        if self._scheduled is None:
            delay = max(0.0, self._last_report + self.interval - loop.time())
            self._scheduled = loop.call_later(delay, self._report, loop)

    def _report(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = None
        self._last_report = loop.time()
        log.warning(
            "connection_limit_hit",
            headersTimedOut=self.counts["headers_timed_out"],
            gaveWayToNewer=self.counts["gave_way"],
            refused=self.counts["refused"],
            headersTooLarge=self.counts["headers_too_large"],
            openConnections=self.open_connections,
            headerTimeoutSeconds=self.limits.header_timeout_seconds,
            maxConnections=self.limits.max_connections,
        )
        self.counts.clear()


class ConnectionGuard:
    """One server's open connections, and those waiting for a request's headers in the order
    they began to wait."""

    def __init__(
        self, limits: ConnectionLimits, *, report_interval: float = REPORT_INTERVAL_SECONDS
    ) -> None:
        self.limits = limits
        self.report = LimitReport(limits, interval=report_interval)
        self.open: set[GuardedHttpProtocol] = set()
        self.waiting: OrderedDict[GuardedHttpProtocol, None] = OrderedDict()

    def admit(self, connection: GuardedHttpProtocol) -> bool:
        """Count a new connection in; False if it must be refused (the cap is reached and no
        connection is waiting for headers)."""
        if len(self.open) >= self.limits.max_connections:
            if not self.waiting:
                self.report.hit("refused", connection.loop, len(self.open))
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.release(oldest)
            oldest.close_quietly()
            self.report.hit("gave_way", connection.loop, len(self.open))
        self.open.add(connection)
        return True

    def release(self, connection: GuardedHttpProtocol) -> None:
        self.open.discard(connection)
        self.waiting.pop(connection, None)


def _raw_error(code: ErrorCode, reason: str, error: str, extra_headers: str = "") -> bytes:
    """A whole HTTP answer with the error body, for when no request reached the app."""
    body = json_codec.dumps(
        {
            "errorCode": int(code),
            "message": code.message,
            "timestamp": format_utc(clock.now()),
            "xTransactionId": str(uuid.uuid4()),
            "errors": [error],
        }
    )
    head = (
        f"HTTP/1.1 {code.status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra_headers}connection: close\r\n"
        "x-content-type-options: nosniff\r\n\r\n"
    )
    return head.encode("ascii") + body


def _refusal() -> bytes:
    return _raw_error(
        ErrorCode.UNAVAILABLE,
        "Service Unavailable",
        "the server has too many open connections; retry in a moment",
        "retry-after: 1\r\n",
    )


def _headers_too_large() -> bytes:
    return _raw_error(
        ErrorCode.HEADERS_TOO_LARGE,
        "Request Header Fields Too Large",
        f"the request headers must be at most {MAX_REQUEST_HEADER_BYTES} bytes",
    )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guard's two bounds (see the module's docstring)."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._headers_due: asyncio.TimerHandle | None = None
        self._header_bytes = 0  # received since the connection began waiting for headers
        self._lingering = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard.admit(self):
            self._answer_and_linger(_refusal())
            return
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self.guard.release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        super().data_received(data)
        if (
            self._headers_due is not None and not self.transport.is_closing()
        ):  # the headers are still unfinished
            self._header_bytes += len(data)
            if self._header_bytes > MAX_UNFINISHED_HEADER_BYTES:
                self.guard.report.hit("headers_too_large", self.loop, len(self.guard.open))
                self._stop_waiting()
                self._answer_and_linger(_headers_too_large())

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # the next request's headers have arrived already
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._await_headers()

    def _answer_and_linger(self, answer: bytes) -> None:
        """Send `answer`, then read and drop what the client still sends for a moment before
        closing: closing with unread data would reset the connection, and with it the answer."""
        self._lingering = True
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.close_quietly)

    def close_quietly(self) -> None:
        self._stop_waiting()
        if not self.transport.is_closing():
            self.transport.close()

    def _await_headers(self) -> None:
        self._stop_waiting()
        self._header_bytes = 0
        self.guard.waiting[self] = None
        self._headers_due = self.loop.call_later(
            self.guard.limits.header_timeout_seconds, self._headers_timed_out
        )

    def _stop_waiting(self) -> None:
        self.guard.waiting.pop(self, None)
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _headers_timed_out(self) -> None:
        self._headers_due = None
        self.guard.report.hit("headers_timed_out", self.loop, len(self.guard.open))
        self.guard.release(self)
        self.close_quietly()


def guarded_http_protocol(
    limits: ConnectionLimits, *, report_interval: float = REPORT_INTERVAL_SECONDS
) -> type[GuardedHttpProtocol]:
    """A protocol class for uvicorn's `http=`, with a guard of its own (one per server)."""
    guard = ConnectionGuard(limits, report_interval=report_interval)
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"guard": guard})
