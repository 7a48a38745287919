"""The /metrics page: the Prometheus text format of this process's metrics (or, with
PROMETHEUS_MULTIPROC_DIR, of every process on the host that shares the directory), the delivery
backlog read from the database at the scrape, and who may read it."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Iterator

import structlog
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from tucano.config import Settings, metrics_directory
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.deliveries.queue.nats import StreamLag
from tucano.deliveries.service import Backlog, delivery_backlog, stream_lag

log = structlog.get_logger("tucano.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METRICS_PATH = "/metrics"
# A scrape waits this long for the backlog, then answers without it: the counters of a process
# whose database is down are what an operator needs most.
BACKLOG_TIMEOUT_SECONDS = 2.0


def may_scrape(settings: Settings, authorization: bytes | None) -> bool:
    """Open in sandbox; in production only to `Authorization: Bearer <TUCANO_METRICS_TOKEN>`
    (compared in constant time), and to nobody while that is unset."""
    if settings.is_sandbox:
        return True
    if settings.metrics_token is None or authorization is None:
        return False
    scheme, _, token = authorization.strip().partition(b" ")
    expected = settings.metrics_token.get_secret_value().encode()
    # compare_digest first, so the time taken says nothing of the scheme either.
    return hmac.compare_digest(token.strip(), expected) and scheme.lower() == b"bearer"


class _BacklogCollector(Collector):
    def __init__(self, backlog: Backlog) -> None:
        self.backlog = backlog

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "tucano_deliveries_due",
            "Deliveries whose attempt is due and not yet recorded (held or in flight included), "
            "read from the database at this scrape.",
            value=self.backlog.due,
        )
        yield GaugeMetricFamily(
            "tucano_oldest_due_delivery_age_seconds",
            "How long the oldest due delivery has been due (0 when none is), read from the "
            "database at this scrape.",
            value=self.backlog.oldest_due_age_seconds,
        )


class _StreamLagCollector(Collector):
    def __init__(self, lag: StreamLag) -> None:
        self.lag = lag

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "tucano_queue_stream_pending_messages",
            "Messages on the NATS stream that no worker has pulled yet (TUCANO_QUEUE=nats), "
            "read from the cluster at this scrape.",
            value=self.lag.pending,
        )
        yield GaugeMetricFamily(
            "tucano_queue_stream_unacknowledged_messages",
            "Messages pulled from the NATS stream and not yet acknowledged: being sent, or "
            "left for a worker with room (TUCANO_QUEUE=nats), read at this scrape.",
            value=self.lag.unacknowledged,
        )


def _recorded() -> bytes:
    """The recorded metrics: this process's, or every process's in the shared directory."""
    if metrics_directory() is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


async def metrics_page(database: Database, settings: Settings) -> bytes:
    """The page: the recorded metrics, then the backlog and, on NATS, the stream's lag (each
    left out, and logged, when it does not come in BACKLOG_TIMEOUT_SECONDS)."""
    registry = CollectorRegistry(auto_describe=False)
    try:
        async with asyncio.timeout(BACKLOG_TIMEOUT_SECONDS):
            registry.register(_BacklogCollector(await delivery_backlog(database)))
    except Exception as exc:
        log.warning("metrics_backlog_unavailable", error=exception_summary(exc)[:300])
    try:
        async with asyncio.timeout(BACKLOG_TIMEOUT_SECONDS):
            lag = await stream_lag(settings)
        if lag is not None:
            registry.register(_StreamLagCollector(lag))
    except Exception as exc:
        log.warning("metrics_stream_lag_unavailable", error=exception_summary(exc)[:300])
    return _recorded() + generate_latest(registry)
