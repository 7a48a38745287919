"""The background loops of a process: the delivery worker and the periodic jobs.

`tucano serve` runs them beside the API (unless --no-worker); `tucano worker` runs only them.
Every job is safe to run in several processes at once: each is a guarded UPDATE or DELETE.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.checkout.card_processor import load_card_processor
from tucano.config import Settings
from tucano.core.clock import clock
from tucano.core.logs import exception_summary
from tucano.db.database import Database
from tucano.db.outages import is_database_unavailable
from tucano.deliveries import service as deliveries
from tucano.deliveries.worker.loop import DeliveryWorker
from tucano.ingest import service as ingest
from tucano.payment_links import lifecycle
from tucano.payment_links import service as payment_links
from tucano.pix.provider import pix_provider_for
from tucano.pix.psp import charges_at_psp
from tucano.pix.scheduled import run_pix_jobs
from tucano.portal import service as portal
from tucano.refunds.refunder import Refunder
from tucano.refunds.scheduled import run_refund_jobs
from tucano.webhooks import service as webhooks
from tucano.webhooks.secret_store import WebhookSecretStore

log = structlog.get_logger("tucano.jobs")
# The longest a failing job waits before it tries again (unless its own interval is longer).
JOB_PAUSE_MAX_SECONDS = 30.0
EXPIRY_CHECK_SECONDS = 10.0


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    interval_seconds: float
    # Runs in its own session; the runner commits. Returns how much it did (for the log).
    run: Callable[[AsyncSession], Awaitable[int]]
    # A routine job (every few seconds) would fill the log with lines saying it ran.
    logs_its_work: bool = True


def periodic_jobs(settings: Settings) -> list[PeriodicJob]:
    async def deactivate_failing(session: AsyncSession) -> int:
        ids = await webhooks.deactivate_failing_webhooks(
            session, failing_for=settings.webhook_deactivate_after, now=clock.now()
        )
        for webhook_id in ids:
            log.warning("webhook_deactivated", webhookId=webhook_id)
        return len(ids)

    async def record_abandoned(session: AsyncSession) -> int:
        return await deliveries.record_abandoned_cancellations(session, now=clock.now())

    async def prune(session: AsyncSession) -> int:
        return await deliveries.prune_history(
            session, older_than=clock.now() - settings.result_retention
        )

    async def prune_keys(session: AsyncSession) -> int:
        now = clock.now()
        pruned = await payment_links.prune_creation_keys(session, now=now)
        return pruned + await ingest.prune_publication_keys(session, now=now)

    async def autopay(session: AsyncSession) -> int:
        return await payment_links.run_due_autopayments(session)

    async def fold_totals(session: AsyncSession) -> int:
        return await payment_links.fold_day_totals(session)

    async def fold_result_counts(session: AsyncSession) -> int:
        return await deliveries.fold_result_counts(session)

    async def announce_expiries(session: AsyncSession) -> int:
        return await lifecycle.announce_expired_links(session)

    async def prune_portal_sessions(session: AsyncSession) -> int:
        return await portal.prune_sessions(session, now=clock.now())

    every = settings.maintenance_interval_seconds
    jobs = [
        PeriodicJob("deactivate_failing_webhooks", every, deactivate_failing),
        PeriodicJob("prune_delivery_history", every, prune),
        PeriodicJob("record_abandoned_cancellations", min(every, 10.0), record_abandoned),
        PeriodicJob("prune_idempotency_keys", every, prune_keys),
        PeriodicJob("prune_portal_sessions", every, prune_portal_sessions),
        # Often enough that a link's EXPIRED event leaves within a minute of its expiry.
        PeriodicJob("announce_expired_links", min(every, EXPIRY_CHECK_SECONDS), announce_expiries),
        # Often: readers add up the changes not folded yet, so fewer is cheaper for them.
        PeriodicJob("fold_payment_link_totals", min(every, 2.0), fold_totals, logs_its_work=False),
        # Each recorded batch appends a few count rows; folded, a list adds up fewer.
        PeriodicJob(
            "fold_delivery_result_counts", min(every, 5.0), fold_result_counts, logs_its_work=False
        ),
    ]
    if settings.is_sandbox:
        # Checked often enough that a payment is at most a fraction of its delay late.
        jobs.append(
            PeriodicJob(
                "sandbox_autopay",
                min(1.0, max(0.05, settings.sandbox_autopay_delay_seconds / 10)),
                autopay,
            )
        )
    return jobs


async def run_periodic_jobs(
    database: Database, jobs: list[PeriodicJob], stop: asyncio.Event
) -> None:
    next_run = dict.fromkeys((job.name for job in jobs), 0.0)
    failures = dict.fromkeys((job.name for job in jobs), 0)  # in a row
    while not stop.is_set():
        now = time.monotonic()
        for job in jobs:
            if now < next_run[job.name]:
                continue
            next_run[job.name] = now + job.interval_seconds
            try:
                async with database.session() as session:
                    done = await job.run(session)
                    await session.commit()
            except Exception as exc:
                failures[job.name] += 1
                # While the database is down every job fails at each turn: the first failure
                # logs its traceback, the next ones a line each, further and further apart.
                backoff = job.interval_seconds * 2 ** min(failures[job.name], 16)
                next_run[job.name] = now + max(
                    job.interval_seconds, min(JOB_PAUSE_MAX_SECONDS, backoff)
                )
                if failures[job.name] == 1 and not is_database_unavailable(exc):
                    log.exception("job_failed", job=job.name)
                else:
                    log.warning(
                        "job_failed",
                        job=job.name,
                        error=exception_summary(exc)[:300],
                        failuresInARow=failures[job.name],
                    )
                continue
            if failures[job.name]:
                log.info("job_resumed", job=job.name, failuresInARow=failures[job.name])
                failures[job.name] = 0
            if done:
                if job.logs_its_work:
                    log.info("job_done", job=job.name, count=done)
                next_run[job.name] = now  # more may be waiting (batched jobs)
        wait = max(0.05, min(next_run.values()) - time.monotonic())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=wait)


async def run_background(
    database: Database,
    settings: Settings,
    stop: asyncio.Event,
    *,
    secret_store: WebhookSecretStore | None = None,
) -> None:
    """Run the worker, the periodic jobs and the refunds still pending (the PSP's charges too,
    with api-pix) until `stop` is set."""
    psp = charges_at_psp(settings)
    refunder = Refunder(card=load_card_processor(settings), pix=pix_provider_for(settings, psp))
    loops = [
        DeliveryWorker(database, settings, secret_store=secret_store).run(stop),
        run_periodic_jobs(database, periodic_jobs(settings), stop),
        run_refund_jobs(database, refunder, stop),
    ]
    if psp is not None:
        loops.append(
            run_pix_jobs(
                database, psp, stop, reconciliation_seconds=settings.pix_reconciliation_seconds
            )
        )
    try:
        await asyncio.gather(*loops)
    finally:
        if psp is not None:
            await psp.close()
