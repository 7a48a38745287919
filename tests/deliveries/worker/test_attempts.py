"""One attempt, phase by phase: what an attempt that did not succeed tells the operator."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from structlog.testing import capture_logs

from tests.support.claims import claimed
from tucano.core.clock import clock
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.queue.backend import ClaimedDelivery, Outcome
from tucano.deliveries.worker.attempts import RetryPolicy, attempt

PAYLOAD = b'{"secretThing":"do-not-log-me"}'
SECRET = "whsec_" + base64.b64encode(b"k" * 24).decode()


class AnswersWith:
    """A Sender that answers every POST with `status` (or fails with `error`), and a body."""

    def __init__(self, status: int | None, error: str | None) -> None:
        self.status, self.error = status, error

    async def send(
        self, delivery: ClaimedDelivery, *, headers: Mapping[str, str], now: datetime
    ) -> Outcome:
        ok = self.status is not None and 200 <= self.status < 300
        return Outcome(
            claimed=delivery,
            status=ResultStatus.SUCCESS if ok else ResultStatus.FAILED,
            target_url=delivery.target_url or "",
            http_status=self.status,
            response_body="a body the receiver sent back",
            error_message=self.error,
            duration_ms=12,
            attempted_at=now,
            next_attempt_at=None,
        )


def policy(*delays: float) -> RetryPolicy:
    return RetryPolicy(
        schedule=[timedelta(seconds=d) for d in delays], retry_after_max=timedelta(hours=1)
    )


async def run(delivery: ClaimedDelivery, sender: Any, retries: RetryPolicy) -> list[dict[str, Any]]:
    delivery = delivery._replace(signing_secrets=(SECRET,))
    with capture_logs() as logs, clock.freeze():
        await attempt(delivery, sender=sender, retries=retries, attempted_at=clock.now())
    return [line for line in logs if line["event"] == "delivery_attempt_failed"]


async def test_a_failed_attempt_logs_one_line_with_its_host_status_attempt_and_next_attempt() -> (
    None
):
    delivery = claimed("https://user:pw@hooks.example.com:8443/in?x=1")._replace(payload=PAYLOAD)
    lines = await run(delivery, AnswersWith(503, "receiver answered HTTP 503"), policy(5, 60))
    assert len(lines) == 1
    line = lines[0]
    assert line["targetHost"] == "hooks.example.com:8443"
    assert line["httpStatus"] == 503
    assert line["error"] == "receiver answered HTTP 503"
    assert line["attempt"] == 1
    assert line["status"] == ResultStatus.PENDING_RETRY
    assert line["nextAttemptAt"].endswith("Z")
    assert line["webhookId"] == delivery.webhook_id and line["eventId"] == delivery.event_id
    logged = repr(line)
    for hidden in ("do-not-log-me", "a body the receiver sent back", "pw@", SECRET):
        assert hidden not in logged


async def test_the_last_attempt_logs_that_no_other_follows() -> None:
    lines = await run(
        claimed("https://hooks.example.com/in"), AnswersWith(None, "timed out"), policy()
    )
    assert [(line["status"], line["nextAttemptAt"]) for line in lines] == [
        (ResultStatus.EXHAUSTED, None)
    ]


async def test_a_delivery_not_sent_logs_why_and_a_success_logs_nothing() -> None:
    inactive = claimed("https://hooks.example.com/in")._replace(webhook_active=False)
    lines = await run(inactive, AnswersWith(200, None), policy(5))
    assert len(lines) == 1 and "inactive" in lines[0]["error"]
    assert (
        await run(claimed("https://hooks.example.com/in"), AnswersWith(200, None), policy(5)) == []
    )
