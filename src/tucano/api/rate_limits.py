"""Request budgets (decisions.md, "Limits and abuse"): each API client's, the token
endpoint's per source address and per (`client_id`, source address), and the checkout's
refused card attempts per source address and per card.

Counted by `limits` (the sliding-window counter: two counters per key, the previous window
weighted by how much of it the sliding window still covers), in the process, or in Redis and so
shared by every process when TUCANO_REDIS_URL is set. While Redis cannot be reached each
process counts alone, and tries Redis again a few seconds later (docs/decisions.md).
"""

from __future__ import annotations

import ipaddress
import math
import time
from dataclasses import dataclass
from typing import Literal

import structlog
from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage, RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError
from redis.asyncio import ConnectionPool
from redis.exceptions import RedisError

from tucano.config import Settings

log = structlog.get_logger("tucano.rate_limits")

# After Redis failed, how long a process counts alone before it asks Redis again.
REDIS_RETRY_SECONDS = 5.0
# A Redis that does not answer in this long is taken as down for the request that waited.
REDIS_TIMEOUT_SECONDS = 0.5
# Keys are what a client sends (a client_id): longer ones share the budget of their start.
_LONGEST_KEY = 128


def with_bursts(rate: RateLimitItem) -> RateLimitItem:
    """`rate` counted over a window twice as long: the same sustained rate, and bursts of twice
    as many requests (100/second becomes 200 per 2 seconds)."""
    return type(rate)(rate.amount * 2, rate.multiples * 2, namespace=rate.namespace)


def address_key(host: str) -> str:
    """The budget a source address counts against: the address itself, or for IPv6 its /64,
    which one host or subscriber is usually given whole."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # not an IP address (a Unix socket's, a test client's name)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def _redis_storage(url: str, key_prefix: str) -> tuple[RedisStorage, ConnectionPool]:
    # Connections that try once (no retry option): a down Redis is answered by counting in the
    # process, not by waiting longer.
    pool = ConnectionPool.from_url(
        url,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
    )
    scheme = "async+redis+unix://" if url.startswith("unix://") else "async+"
    storage = RedisStorage(
        scheme + url.removeprefix("unix://"),
        wrap_exceptions=True,
        implementation="redispy",
        key_prefix=key_prefix,
        connection_pool=pool,  # type: ignore[arg-type]
    )
    return storage, pool


@dataclass(frozen=True)
class CardAttemptsSpent:
    """A card attempt refused before the processor: the budget that is spent, and for how long."""

    budget: Literal["address", "card"]
    retry_after: int


class RateLimits:
    """The budgets of one app; each check answers None (go on) or the seconds to wait."""

    def __init__(self, settings: Settings) -> None:
        self.client_rate = with_bursts(parse(settings.rate_limit))
        self.token_rate = parse(settings.token_rate_limit)
        self.card_address_rate = parse(settings.card_refusals_per_address)
        self.card_rate = parse(settings.card_refusals_per_card)
        self._local = SlidingWindowCounterRateLimiter(MemoryStorage())
        self._shared: SlidingWindowCounterRateLimiter | None = None
        self._pool: ConnectionPool | None = None
        if settings.redis_url is not None:
            storage, self._pool = _redis_storage(
                settings.redis_url.get_secret_value(), settings.redis_key_prefix
            )
            self._shared = SlidingWindowCounterRateLimiter(storage)
        self._redis_down_until: float | None = None  # time.monotonic() while Redis is down

    async def client_retry_after(self, client_id: str) -> int | None:
        """Counts one request of the API client (TUCANO_RATE_LIMIT)."""
        return await self._hit(self.client_rate, "client", client_id)

    async def token_address_retry_after(self, host: str) -> int | None:
        """Counts one token request from this address (TUCANO_TOKEN_RATE_LIMIT)."""
        return await self._hit(self.token_rate, "token-address", address_key(host))

    async def token_client_retry_after(self, client_id: str, host: str) -> int | None:
        """Counts one token request for this client_id, known or not, from this address
        (TUCANO_TOKEN_RATE_LIMIT). Not for the client_id alone: anyone may know it, and wrong
        secrets from one address must not keep the right one out from another."""
        # The address first: a long client_id is what the key's cut shortens.
        return await self._hit(self.token_rate, "token-client", f"{address_key(host)} {client_id}")

    async def reserve_card_attempt(self, host: str, card_key: str) -> CardAttemptsSpent | None:
        """Takes one refused card attempt from this address's budget and from this card's
        (TUCANO_CARD_REFUSALS_PER_ADDRESS, TUCANO_CARD_REFUSALS_PER_CARD), or says which is
        spent. `card_key` is a keyed hash, never a card number. Taken before the processor is
        asked, so that attempts sent at once cannot all get through; one that was not refused
        gives its place back (release_card_attempt)."""
        address = address_key(host)
        retry_after = await self._hit(self.card_address_rate, "card-address", address)
        if retry_after is not None:
            return CardAttemptsSpent("address", retry_after)
        retry_after = await self._hit(self.card_rate, "card", card_key)
        if retry_after is not None:
            await self._hit(self.card_address_rate, "card-address", address, cost=-1)
            return CardAttemptsSpent("card", retry_after)
        return None

    async def release_card_attempt(self, host: str, card_key: str) -> None:
        """Gives back what reserve_card_attempt took, for an attempt that was not refused."""
        # A negative cost takes one off the window's count (the library checks only that a
        # cost is not over the limit).
        await self._hit(self.card_address_rate, "card-address", address_key(host), cost=-1)
        await self._hit(self.card_rate, "card", card_key, cost=-1)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()

    async def _hit(self, rate: RateLimitItem, kind: str, key: str, cost: int = 1) -> int | None:
        key = key[:_LONGEST_KEY]
        shared = self._shared_limiter()
        if shared is not None:
            try:
                retry_after = await _retry_after(shared, rate, kind, key, cost)
            except (StorageError, RedisError, OSError) as exc:
                self._redis_failed(exc)
            else:
                self._redis_answered()
                return retry_after
        return await _retry_after(self._local, rate, kind, key, cost)

    def _shared_limiter(self) -> SlidingWindowCounterRateLimiter | None:
        if self._redis_down_until is not None and time.monotonic() < self._redis_down_until:
            return None
        return self._shared

    def _redis_failed(self, exc: Exception) -> None:
        if self._redis_down_until is None:
            cause = getattr(exc, "storage_error", exc)
            log.warning(
                "rate_limit_redis_unreachable",
                error=type(cause).__name__,
                hint="rate limits are counted in each process until Redis answers again",
            )
        self._redis_down_until = time.monotonic() + REDIS_RETRY_SECONDS

    def _redis_answered(self) -> None:
        if self._redis_down_until is not None:
            self._redis_down_until = None
            log.info("rate_limit_redis_reachable", hint="rate limits are shared again")


async def _retry_after(
    limiter: SlidingWindowCounterRateLimiter,
    rate: RateLimitItem,
    kind: str,
    key: str,
    cost: int = 1,
) -> int | None:
    if await limiter.hit(rate, kind, key, cost=cost):
        return None
    stats = await limiter.get_window_stats(rate, kind, key)
    return max(1, math.ceil(stats.reset_time - time.time()))
