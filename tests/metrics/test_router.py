"""/metrics as Prometheus meets it: open in sandbox and, in production, answering only to the
metrics token."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support.service import RunningService, assert_error_body, serving
from tests.support.settings import make_settings
from tucano.core.errors import ErrorCode
from tucano.db.database import Database

METRICS_TOKEN = "metrics-token-5f0c2a9e7b41d386c8e1a4"


def metric_names(page: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(page)}


async def test_metrics_are_open_in_sandbox(service: RunningService) -> None:
    answer = await service.http.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert {"tucano_http_requests", "tucano_deliveries_due"} <= metric_names(answer.text)


async def test_production_metrics_answer_only_to_the_metrics_token(
    database_url: str, database: Database
) -> None:
    settings = make_settings(database_url, environment="production", metrics_token=METRICS_TOKEN)
    async with serving(settings, database) as service:
        refused = [
            {},
            {"Authorization": "Bearer wrong-token-of-the-same-size"},
            {"Authorization": f"Bearer {METRICS_TOKEN}x"},
            {"Authorization": f"Basic {METRICS_TOKEN}"},
            {"Authorization": METRICS_TOKEN},
        ]
        for headers in refused:
            answer = await service.http.get("/metrics", headers=headers)
            # The same answer as a path that is no route: nothing says the page is there.
            assert_error_body(answer, 404, ErrorCode.ROUTE_NOT_FOUND)
        for scheme in ("Bearer", "bearer"):
            answer = await service.http.get(
                "/metrics", headers={"Authorization": f"{scheme} {METRICS_TOKEN}"}
            )
            assert answer.status_code == 200, answer.text
            assert "tucano_http_requests_total" in answer.text


async def test_production_metrics_are_a_missing_page_while_no_token_is_set(
    production_service: RunningService,
) -> None:
    for headers in ({}, {"Authorization": "Bearer anything-at-all-here"}):
        answer = await production_service.http.get("/metrics", headers=headers)
        assert_error_body(answer, 404, ErrorCode.ROUTE_NOT_FOUND)
