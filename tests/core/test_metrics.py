"""The metrics as a dashboard reads them: requests under their route's template (one series per
route, not per id), paths of no route and odd methods each under one value, delivery attempts
by outcome and the latency of those that succeeded."""

from __future__ import annotations

from prometheus_client import REGISTRY

from tests.support.service import RunningService
from tucano.core.metrics import OTHER_METHOD, UNMATCHED_ROUTE, record_attempt


def requests(method: str, route: str, status: str) -> float:
    labels = {"method": method, "route": route, "status": status}
    return REGISTRY.get_sample_value("tucano_http_requests_total", labels) or 0.0


def timed(method: str, route: str) -> float:
    labels = {"method": method, "route": route}
    return REGISTRY.get_sample_value("tucano_http_request_duration_seconds_count", labels) or 0.0


async def test_requests_are_counted_by_route_template_not_by_path(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    before = requests("GET", "/webhook/v1/{id}", "404")
    timed_before = timed("GET", "/webhook/v1/{id}")
    for webhook_id in (9_000_001, 9_000_002, 9_000_003):
        assert (await merchant.get(f"/webhook/v1/{webhook_id}")).status_code == 404
    assert requests("GET", "/webhook/v1/{id}", "404") == before + 3
    assert timed("GET", "/webhook/v1/{id}") == timed_before + 3
    samples = REGISTRY.get_sample_value
    assert samples("tucano_http_requests_total", {"route": "/webhook/v1/9000001"}) is None


async def test_paths_of_no_route_and_unknown_methods_share_one_value_each(
    service: RunningService,
) -> None:
    unmatched = requests("GET", UNMATCHED_ROUTE, "404")
    for path in ("/no/such/route", "/another/one", "/webhook/v1/1/nothing"):
        assert (await service.http.get(path)).status_code == 404
    assert requests("GET", UNMATCHED_ROUTE, "404") == unmatched + 3
    # A method the route does not take: its route is known, and the 405 is counted under it.
    not_allowed = requests("DELETE", "/health/live", "405")
    assert (await service.http.delete("/health/live")).status_code == 405
    assert requests("DELETE", "/health/live", "405") == not_allowed + 1
    odd = requests(OTHER_METHOD, "/health/live", "405")
    for method in ("PROPFIND", "PURGE"):  # methods the HTTP parser knows; others it refuses
        assert (await service.http.request(method, "/health/live")).status_code == 405
    assert requests(OTHER_METHOD, "/health/live", "405") == odd + 2


def attempts(outcome: str) -> float:
    labels = {"outcome": outcome}
    return REGISTRY.get_sample_value("tucano_delivery_attempts_total", labels) or 0.0


def test_attempts_are_counted_by_outcome_and_only_successes_timed() -> None:
    before = {name: attempts(name) for name in ("success", "pending_retry", "exhausted", "failed")}
    latency_count = REGISTRY.get_sample_value("tucano_delivery_latency_seconds_count") or 0.0
    latency_sum = REGISTRY.get_sample_value("tucano_delivery_latency_seconds_sum") or 0.0
    within_a_second = REGISTRY.get_sample_value(
        "tucano_delivery_latency_seconds_bucket", {"le": "1.0"}
    )
    for status, latency in (
        ("SUCCESS", 0.4),
        ("SUCCESS", 90.0),
        ("PENDING_RETRY", 3.0),
        ("EXHAUSTED", 72_000.0),
        ("FAILED", 0.0),
    ):
        record_attempt(status, latency_seconds=latency)
    after = {name: attempts(name) for name in before}
    assert {name: after[name] - before[name] for name in before} == {
        "success": 2,
        "pending_retry": 1,
        "exhausted": 1,
        "failed": 1,
    }
    assert REGISTRY.get_sample_value("tucano_delivery_latency_seconds_count") == latency_count + 2
    latency = REGISTRY.get_sample_value("tucano_delivery_latency_seconds_sum")
    assert latency is not None and abs(latency - latency_sum - 90.4) < 1e-6
    assert (
        REGISTRY.get_sample_value("tucano_delivery_latency_seconds_bucket", {"le": "1.0"})
        == (within_a_second or 0.0) + 1
    )
