"""The refunds' periodic work, in the background loops of `tucano serve` and `tucano worker`:
PENDING refunds asked about again until they end (safe in several processes: each is leased)."""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.refunds.refunder import Refunder
from tucano.refunds.service import run_due_refunds

log = structlog.get_logger("tucano.refunds")

INTERVAL_SECONDS = 1.0


async def run_refund_jobs(database: Database, refunder: Refunder, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            while await run_due_refunds(database, refunder) and not stop.is_set():
                pass
        except Exception as exc:  # a job that fails tries again at its next turn
            log.warning("refund_job_failed", error=exception_summary(exc)[:300])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=INTERVAL_SECONDS)
