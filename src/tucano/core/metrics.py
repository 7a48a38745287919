"""The Prometheus metrics a Tucano process records: HTTP requests (the edge middleware),
delivery attempts (the worker's recorder) and calls to the Pix provider's PSP (pix/).
docs/operations.md, "Metrics and health", lists them.

They live in prometheus_client's default registry, so with PROMETHEUS_MULTIPROC_DIR set before
the process starts (prometheus_client reads it at import) their values are files in that
directory, which any process on the host adds up when scraped (tucano.metrics.exposition).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

# The value of the route label for a request that matched no route, or was answered at the edge
# before routing (a body or headers over the limit): a template always starts with "/".
UNMATCHED_ROUTE = "unmatched"
# Methods a client may send are any token: others are counted together, so that no client can
# make a series per word it sends.
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
OTHER_METHOD = "other"

# API answers take milliseconds; the top buckets are there for slow exports and outages.
_REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# From a first attempt (tens of milliseconds) to the last retry of the default schedule (a day).
_DELIVERY_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 4 * 3600, 86400,
)  # fmt: skip

HTTP_REQUESTS = Counter(
    "tucano_http_requests_total",
    "HTTP requests answered, by method, route template and status.",
    ("method", "route", "status"),
)
HTTP_REQUEST_DURATION = Histogram(
    "tucano_http_request_duration_seconds",
    "Time from a request's arrival at the edge middleware to its last byte sent, by method and "
    "route template.",
    ("method", "route"),
    buckets=_REQUEST_BUCKETS,
)
DELIVERY_ATTEMPTS = Counter(
    "tucano_delivery_attempts_total",
    "Delivery attempts handed to the recorder, by outcome: success, pending_retry, exhausted, "
    "or failed (not sent: its webhook was deleted, deactivated or changed type).",
    ("outcome",),
)
DELIVERY_LATENCY = Histogram(
    "tucano_delivery_latency_seconds",
    "Time from an event's creation in its publishing transaction to a 2xx from the webhook, "
    "retries included.",
    buckets=_DELIVERY_BUCKETS,
)
# A PSP answers in tens of milliseconds; the top buckets are for its timeouts (10 s by default).
_PIX_CALL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
PIX_PROVIDER_CALLS = Counter(
    "tucano_pix_provider_calls_total",
    "HTTP exchanges with the PSP's API Pix (each attempt, OAuth token requests included), by "
    "operation and outcome: success, rejected (a 4xx), failed (a 5xx, a 429 or an unreadable "
    "answer), or unavailable (a timeout or no connection).",
    ("operation", "outcome"),
)
PIX_PROVIDER_CALL_DURATION = Histogram(
    "tucano_pix_provider_call_seconds",
    "Time of each HTTP exchange with the PSP's API Pix, by operation, whatever its outcome.",
    ("operation",),
    buckets=_PIX_CALL_BUCKETS,
)
REFUND_ANSWERS = Counter(
    "tucano_refund_answers_total",
    "Answers to a refund asked of the card processor or the Pix provider, by method (card, "
    "pix) and outcome: succeeded, failed, or pending (in progress, or no answer: asked again).",
    ("method", "outcome"),
)

_OUTCOMES = {
    "SUCCESS": "success",
    "PENDING_RETRY": "pending_retry",
    "EXHAUSTED": "exhausted",
    "FAILED": "failed",
}
# Each label set's child, once looked up: labels() takes a lock and builds a key each call.
_request_counters: dict[tuple[str, str, int], Counter] = {}
_request_timers: dict[tuple[str, str], Histogram] = {}
_attempt_counters = {status: DELIVERY_ATTEMPTS.labels(name) for status, name in _OUTCOMES.items()}


def record_request(method: str, route: str, status: int, seconds: float) -> None:
    """One answered request; `route` is its route's template or UNMATCHED_ROUTE."""
    if method not in _KNOWN_METHODS:
        method = OTHER_METHOD
    counter = _request_counters.get((method, route, status))
    if counter is None:
        counter = _request_counters[method, route, status] = HTTP_REQUESTS.labels(
            method, route, str(status)
        )
    counter.inc()
    timer = _request_timers.get((method, route))
    if timer is None:
        timer = _request_timers[method, route] = HTTP_REQUEST_DURATION.labels(method, route)
    timer.observe(seconds)


def record_attempt(status: str, *, latency_seconds: float) -> None:
    """One attempt by its status (a ResultStatus); a success also its delivery latency."""
    _attempt_counters[status].inc()
    if status == "SUCCESS":
        DELIVERY_LATENCY.observe(max(0.0, latency_seconds))


def record_pix_call(operation: str, outcome: str, seconds: float) -> None:
    """One exchange with the PSP: `operation` and `outcome` come from a fixed list in pix/."""
    PIX_PROVIDER_CALLS.labels(operation, outcome).inc()
    PIX_PROVIDER_CALL_DURATION.labels(operation).observe(max(0.0, seconds))
