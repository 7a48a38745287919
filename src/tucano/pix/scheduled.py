"""The `api-pix` provider's periodic work, in the background loops of `tucano serve` and
`tucano worker`: charges made for new links, withdrawn for closed ones, checked for missed
payments. Each step is safe in several processes at once (charges are leased)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from tucano.core.clock import clock
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.pix import charges
from tucano.pix.charges import ChargesAtPsp

log = structlog.get_logger("tucano.pix")

CHARGE_INTERVAL_SECONDS = 1.0
WITHDRAW_INTERVAL_SECONDS = 30.0
# Charges asked about per reconciliation: a PSP limits its clients' calls.
CHECKS_PER_RUN = 100


async def run_pix_jobs(
    database: Database,
    psp: ChargesAtPsp,
    stop: asyncio.Event,
    *,
    reconciliation_seconds: float,
) -> None:
    due = {"charges": 0.0, "withdrawals": 0.0, "reconciliation": time.monotonic()}
    while not stop.is_set():
        started = time.monotonic()
        try:
            if started >= due["charges"]:
                due["charges"] = started + CHARGE_INTERVAL_SECONDS
                await charges.add_missing_charges(database, clock.now())
                await charges.create_due_charges(database, psp, clock.now())
            if started >= due["withdrawals"]:
                due["withdrawals"] = started + WITHDRAW_INTERVAL_SECONDS
                await charges.withdraw_closed_charges(database, psp, clock.now())
            if started >= due["reconciliation"]:
                due["reconciliation"] = started + reconciliation_seconds
                paid = await charges.reconcile_charges(database, psp, clock.now(), CHECKS_PER_RUN)
                if paid:
                    log.warning("pix_payments_recovered", paid=paid)
        except Exception as exc:  # a job that fails tries again at its next turn
            log.warning("pix_job_failed", error=exception_summary(exc)[:300])
        with_next = min(due.values()) - time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.05, with_next))
