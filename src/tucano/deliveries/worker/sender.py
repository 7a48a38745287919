"""One HTTP POST of one claimed delivery (the `make_http_call` phase of an attempt), to a target
that has been checked at connect time.

The SSRF guard runs inside aiohttp's resolver: the addresses that are checked are the addresses
aiohttp connects to, so DNS cannot change between check and connect. IP literals never reach a
resolver, so they are checked before the request. Redirects are not followed, cookies are never
kept, proxies from the environment are ignored, and at most 1 KiB of the answer is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

import tucano
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.deliveries.worker.retry import parse_retry_after
from tucano.webhooks.url_safety import (
    IPNetwork,
    TargetRefused,
    literal_address,
    parse_target_url,
    refuse_unless_allowed,
)

USER_AGENT = f"Tucano-Webhooks/{tucano.__version__}"
RESPONSE_BODY_LIMIT = 1024


class TargetRefusedError(OSError):
    """Raised by the resolver; aiohttp wraps it, the sender unwraps it."""


class SafeResolver(AbstractResolver):
    """Resolves like aiohttp's default resolver, then refuses the host if any address it
    resolves to is not public (or inside the allowed networks)."""

    def __init__(self, allowed_networks: Sequence[IPNetwork]) -> None:
        self._inner = DefaultResolver()
        self._allowed = list(allowed_networks)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        addresses = []
        for result in results:
            address = literal_address(result["host"])
            if address is None:
                raise TargetRefusedError(f"host {host} resolved to an unreadable address")
            addresses.append(address)
        try:
            refuse_unless_allowed(host.rstrip("."), addresses, self._allowed)
        except TargetRefused as exc:
            raise TargetRefusedError(str(exc)) from None
        return results

    async def close(self) -> None:
        await self._inner.close()


class Sender:
    """POSTs deliveries; one per process, sharing a connection pool."""

    def __init__(
        self,
        *,
        allowed_networks: Sequence[IPNetwork],
        allow_http: bool,
        timeout: float,
        max_connections: int,
    ) -> None:
        self._allowed = list(allowed_networks)
        self._allow_http = allow_http
        self._timeout = timeout
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._checked: dict[str, str | None] = {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                resolver=SafeResolver(self._allowed),
                ttl_dns_cache=30,
                enable_cleanup_closed=True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # aiohttp rounds a timeout of ceil_threshold seconds or more up to the loop's
                # next whole second (fewer timer wake-ups); 15 s must not mean up to 16.
                timeout=aiohttp.ClientTimeout(
                    total=self._timeout, ceil_threshold=self._timeout + 1
                ),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                auto_decompress=False,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def check_target(self, url: str) -> str | None:
        """Why this URL may not be sent to before any network I/O, or None. Pure in the URL
        (names are checked at connect time by the resolver), so remembered per URL."""
        if url in self._checked:
            return self._checked[url]
        try:
            target = parse_target_url(url, allow_http=self._allow_http)
            if target.literal_ip is not None:
                refuse_unless_allowed(
                    target.host, [target.literal_ip], self._allowed, resolved=False
                )
            verdict = None
        except TargetRefused as exc:
            verdict = f"targetUrl {exc}"
        if len(self._checked) > 10_000:
            self._checked.clear()
        self._checked[url] = verdict
        return verdict

    async def send(
        self, claimed: ClaimedDelivery, *, headers: Mapping[str, str], now: datetime
    ) -> Outcome:
        """POST `claimed`'s payload to its webhook's URL: SUCCESS on a 2xx, else FAILED with
        what went wrong (the attempt's retry is the worker's to schedule)."""
        url = claimed.target_url or ""
        body = claimed.payload
        started = time.perf_counter()
        status: int | None = None
        head = bytearray()  # of the answer's body, as much as came
        text: str | None = None
        retry_after: timedelta | None = None
        error: str | None = self.check_target(url)
        if error:
            error = f"refused: {error}"
        else:
            try:
                async with self._client().post(
                    url, data=body, headers=headers, allow_redirects=False
                ) as response:
                    status = response.status
                    with contextlib.suppress(
                        TimeoutError, aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError
                    ):
                        # The status line and headers are the answer, whether or not the rest
                        # of its first KiB follows in time: a 2xx is a success, what came is kept.
                        await _read_head_of_body(response.content, head)
                    if status in (429, 503):
                        retry_after = parse_retry_after(
                            response.headers.get("Retry-After"), now=now
                        )
                    if 300 <= status < 400:
                        location = response.headers.get("Location", "")[:300]
                        error = f"receiver answered HTTP {status}; redirects are not followed"
                        if location:
                            error += f" (Location: {location})"
                    elif not 200 <= status < 300:
                        error = f"receiver answered HTTP {status}"
            except aiohttp.ClientConnectorDNSError as exc:
                if isinstance(exc.os_error, TargetRefusedError):
                    error = f"refused: targetUrl {exc.os_error}"
                else:
                    error = f"could not resolve the host: {exc.os_error}"
            except TimeoutError:
                error = f"timed out after {self._timeout:g} s without a complete answer"
            except aiohttp.ClientSSLError as exc:
                error = f"TLS error: {exc}"
            except aiohttp.ClientConnectorError as exc:
                error = f"could not connect: {exc.os_error}"
            except aiohttp.ServerDisconnectedError:
                error = "the receiver closed the connection without a complete answer"
            except aiohttp.ClientPayloadError as exc:
                error = f"the answer's body could not be read: {exc}"
            except aiohttp.ClientResponseError as exc:
                error = f"the answer was not valid HTTP: {exc.message}"
            except aiohttp.InvalidURL as exc:
                # An IPv4 spelling the client refuses (127.1) on a webhook an older release
                # registered; spellings it reads as names still work.
                error = f"targetUrl cannot be sent to: {exc}"
            except aiohttp.ClientConnectionError as exc:
                error = f"connection error: {exc}"
            except aiohttp.ClientError as exc:
                error = f"{type(exc).__name__}: {exc}"
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                error = f"connection error: {exc}"
        if status is not None:
            text = _stored_text(bytes(head))
        return Outcome(
            claimed=claimed,
            status=ResultStatus.SUCCESS if error is None else ResultStatus.FAILED,
            target_url=url,
            http_status=status,
            response_body=text,
            error_message=None if error is None else _printable(error)[:500],
            duration_ms=int((time.perf_counter() - started) * 1000),
            attempted_at=now,
            next_attempt_at=None,
            retry_after=retry_after,
        )


async def _read_head_of_body(content: aiohttp.StreamReader, head: bytearray) -> None:
    """Read the first RESPONSE_BODY_LIMIT bytes of an answer into `head`, however many chunks
    they come in (what came stays there if the reading is cut short)."""
    while len(head) < RESPONSE_BODY_LIMIT:
        more = await content.read(RESPONSE_BODY_LIMIT - len(head))
        if not more:
            break
        head += more


def _stored_text(head: bytes) -> str:
    """The head of an answer as text of at most RESPONSE_BODY_LIMIT bytes in UTF-8: bytes that
    are not UTF-8 read as U+FFFD (three bytes each), and a character cut at the limit dropped."""
    text = _printable(head.decode("utf-8", errors="replace"))
    if text.isascii() or len(encoded := text.encode()) <= RESPONSE_BODY_LIMIT:
        return text
    return encoded[:RESPONSE_BODY_LIMIT].decode("utf-8", errors="ignore")


def _printable(text: str) -> str:
    """Text as it can be stored and shown anywhere: no NUL, no lone surrogate."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")
