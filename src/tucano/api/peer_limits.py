"""The share of a process one peer address may hold: at most so many requests in flight.

A client that opens many connections and stalls each request (a body that never comes whole,
say) would otherwise take every request the process can hold, and keep out clients from
everywhere else. Past the bound, a request from that address is answered 429 at once and its
connection closed; requests from other addresses are not affected. Connections that have not
sent a whole request's headers never reach the application: the server's `limit_concurrency`
and a proxy in front bound those (docs/security.md, "What the process bounds, and what the
proxy must").
"""

from __future__ import annotations

import asyncio
from collections import Counter

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from tucano.api.errors import error_response
from tucano.api.rate_limits import address_key
from tucano.core.errors import ErrorCode

log = structlog.get_logger("tucano.peer_limits")

# One line per this many seconds at most while the bound is being hit, with the count since the
# line before: a flood from one address must not become a flood of log lines.
REPORT_INTERVAL_SECONDS = 10.0


class PeerLimitReport:
    """Counts the requests refused per address and logs them: the first at once, then one
    warning line per interval at most."""

    def __init__(self, limit: int, interval: float) -> None:
        self.limit = limit
        self.interval = interval
        self.refused: Counter[str] = Counter()
        self.last_report = float("-inf")
        self.scheduled: asyncio.TimerHandle | None = None

    def hit(self, peer: str) -> None:
        self.refused[peer] += 1
        if self.scheduled is None:
            loop = asyncio.get_running_loop()
            delay = max(0.0, self.last_report + self.interval - loop.time())
            self.scheduled = loop.call_later(delay, self.report, loop)

    def report(self, loop: asyncio.AbstractEventLoop) -> None:
        self.scheduled = None
        self.last_report = loop.time()
        for peer, refused in self.refused.most_common(10):
            log.warning("peer_limit_hit", peer=peer, refused=refused, maxRequestsPerPeer=self.limit)
        self.refused.clear()


class PeerLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_requests_per_peer: int,
        report_interval: float = REPORT_INTERVAL_SECONDS,
    ) -> None:
        self.app = app
        self.max_requests_per_peer = max_requests_per_peer
        self.in_flight: Counter[str] = Counter()
        self.report = PeerLimitReport(max_requests_per_peer, report_interval)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] != "http" or not client:
            await self.app(scope, receive, send)
            return
        peer = address_key(client[0])
        if self.in_flight[peer] >= self.max_requests_per_peer:
            self.report.hit(peer)
            state = scope.get("state") or {}
            answer = error_response(
                ErrorCode.RATE_LIMITED,
                str(state.get("transaction_id", "")),
                errors=[
                    f"this address has {self.max_requests_per_peer} requests in flight, "
                    "the most one address may have; retry when one has been answered"
                ],
                headers={"Retry-After": "1", "Connection": "close"},
            )
            await answer(scope, receive, send)
            return
        self.in_flight[peer] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[peer] -= 1
            if not self.in_flight[peer]:
                del self.in_flight[peer]
