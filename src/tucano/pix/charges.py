"""Payment links' charges at the merchant's PSP (the `api-pix` provider), as jobs run them.

A link is never made to wait for the PSP: a charge row is added for each open link after its
commit (`add_missing_charges`), then made at the PSP (`create_due_charges`, retried with a
growing delay while the PSP is down), withdrawn once its link can no longer be paid
(`withdraw_closed_charges`), and checked when a payment may have been missed
(`reconcile_charges`). A charge's payment, from the PSP's webhook or a check, pays the link
through the same path as a Pix event (`ingest.pix.pay_link_by_pix`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.brazil.pix import new_txid
from tucano.core.clock import clock
from tucano.core.money import from_cents
from tucano.customers import service as customers
from tucano.db.database import Database
from tucano.ingest.pix import pay_link_by_pix
from tucano.payment_links import service as payment_links
from tucano.payment_links.models import Payment
from tucano.pix.models import ACTIVE, FAILED, PAID, PENDING, WITHDRAWN, PixCharge
from tucano.pix.repository import PixChargeRepository

log = structlog.get_logger("tucano.pix")

# Held by one process while it talks to the PSP about it; longer than any call with retries.
LEASE = timedelta(minutes=2)
FIRST_RETRY = timedelta(seconds=5)
LONGEST_RETRY = timedelta(minutes=10)
BATCH = 50


@dataclass(frozen=True)
class ReceivedPix:
    end_to_end_id: str
    amount: Decimal


@dataclass(frozen=True)
class PspCharge:
    """What Tucano reads of a charge at the PSP."""

    status: str
    pix_copia_e_cola: str | None
    paid: tuple[ReceivedPix, ...]


@dataclass(frozen=True)
class PspRefund:
    """What Tucano reads of a devolution at the PSP."""

    status: str  # EM_PROCESSAMENTO, DEVOLVIDO or NAO_REALIZADO
    devolution_id: str | None  # rtrId
    reason: str | None


class PspRefused(Exception):
    """The PSP answered that it will not do it (a 4xx problem): retrying cannot help."""


class PspUnreachable(Exception):
    """The PSP did not answer in time, or answered 5xx: worth trying again later."""


class ChargesAtPsp(Protocol):
    """The PSP's charges, as the jobs need them (pix/api_pix_client.py speaks them)."""

    async def create(
        self,
        txid: str,
        *,
        expires_in_seconds: int,
        payer_document: str,
        payer_name: str,
        amount: Decimal,
        key: str,
        description: str | None,
    ) -> PspCharge: ...

    async def read(self, txid: str) -> PspCharge: ...

    async def refund(
        self, end_to_end_id: str, refund_id: str, *, amount: Decimal, description: str | None
    ) -> PspRefund:
        """Ask for a devolution of the Pix (or about it: the same id and body answer the same
        devolution)."""
        ...

    async def withdraw(self, txid: str) -> PspCharge | None:
        """Withdraw it; the charge as the PSP then has it (paid just before, say), or None if
        the PSP has no such charge."""
        ...

    async def close(self) -> None: ...


async def add_missing_charges(database: Database, now: datetime) -> int:
    """A PENDING charge for every open link that has none; how many were added."""
    async with database.session() as session:
        charges = PixChargeRepository(session)
        links = await charges.open_links_without_charge(now, BATCH)
        for link in links:
            await charges.add(
                PixCharge(
                    link_id=link.id,
                    customer_id=link.customer_id,
                    txid=new_txid(),
                    status=PENDING,
                    attempts=0,
                    next_attempt_at=now,
                    created_at=now,
                    updated_at=now,
                )
            )
        await session.commit()
    return len(links)


def retry_delay(attempts: int) -> timedelta:
    delay: timedelta = FIRST_RETRY * 2 ** max(0, attempts - 1)
    return min(delay, LONGEST_RETRY)


async def create_due_charges(database: Database, psp: ChargesAtPsp, now: datetime) -> int:
    """Make at the PSP the PENDING charges that are due; how many it now has."""
    async with database.session() as session:
        claimed = await PixChargeRepository(session).claim_due(
            PENDING, now, lease_until=now + LEASE, limit=BATCH
        )
        await session.commit()
    created = 0
    for charge in claimed:
        created += await create_one(database, psp, charge.id)
    return created


async def create_one(database: Database, psp: ChargesAtPsp, charge_id: int) -> int:
    async with database.session() as session:
        charge = await session.get(PixCharge, charge_id)
        assert charge is not None  # charges are deleted only with their link
        link = await payment_links.lock_link(session, charge.link_id)
        profile = await customers.get_profile(session, customer_id=link.customer_id)
        now = clock.now()
        context = {"customerId": link.customer_id, "linkPaymentUuid": str(link.uuid)}
        if link.status != "CREATED" or link.expires_at <= now:
            charge.status, charge.updated_at = WITHDRAWN, now  # never made: nothing to withdraw
            await session.commit()
            return 0
        if profile is None or not profile.pix_key:
            return await give_up(session, charge, "the merchant has no Pix key", context)
        try:
            answer = await psp.create(
                charge.txid,
                expires_in_seconds=max(1, int((link.expires_at - now).total_seconds())),
                payer_document=link.registration_number,
                payer_name=link.payer_name,
                amount=from_cents(link.amount_cents),
                key=profile.pix_key,
                description=link.description,
            )
        except PspRefused as refused:
            return await give_up(session, charge, str(refused), context)
        except PspUnreachable as unreachable:
            charge.attempts += 1
            charge.next_attempt_at = now + retry_delay(charge.attempts)
            charge.last_error = str(unreachable)[:300]
            charge.updated_at = now
            log.warning(
                "pix_charge_postponed",
                **context,
                attempts=charge.attempts,
                nextAttemptAt=charge.next_attempt_at.isoformat(),
                error=charge.last_error,
            )
            await session.commit()
            return 0
        charge.status, charge.pix_copia_e_cola = ACTIVE, answer.pix_copia_e_cola
        charge.attempts += 1
        charge.updated_at = now
        log.info("pix_charge_created", **context, attempts=charge.attempts)
        await session.commit()
        return 1


async def give_up(
    session: AsyncSession, charge: PixCharge, reason: str, context: dict[str, object]
) -> int:
    charge.status, charge.last_error, charge.updated_at = FAILED, reason[:300], clock.now()
    log.warning("pix_charge_refused", **context, reason=charge.last_error)
    await session.commit()
    return 0


async def withdraw_closed_charges(database: Database, psp: ChargesAtPsp, now: datetime) -> int:
    """Withdraw at the PSP the charges of links that can no longer be paid; how many."""
    async with database.read_session() as session:
        closing = await PixChargeRepository(session).active_of_closed_links(now, BATCH)
        ids = [charge.id for charge in closing]
    withdrawn = 0
    for charge_id in ids:
        async with database.session() as session:
            charge = await session.get(PixCharge, charge_id)
            if charge is None or charge.status != ACTIVE:
                continue
            try:
                answer = await psp.withdraw(charge.txid)
            except PspUnreachable as unreachable:
                log.warning(
                    "pix_charge_withdrawal_postponed", txid=charge.txid, error=str(unreachable)
                )
                continue
            except PspRefused as refused:
                log.warning("pix_charge_withdrawal_refused", txid=charge.txid, reason=str(refused))
                answer = None
            if answer is not None and answer.paid:
                # Paid just before it was withdrawn: settle pays the link if it still can be,
                # and logs the payment otherwise (the money is then the merchant's to return).
                for received in answer.paid:
                    await settle(session, txid=charge.txid, received=received, source="withdrawal")
            if charge.status == ACTIVE:
                charge.status, charge.updated_at = WITHDRAWN, clock.now()
                withdrawn += 1
            await session.commit()
    return withdrawn


async def settle(
    session: AsyncSession, *, txid: str, received: ReceivedPix, source: str
) -> Payment | None:
    """Pay the link of the charge `txid` with `received`, if it is its amount and the link can
    still be paid; otherwise pay nothing and log it."""
    context: dict[str, object] = {"txid": txid, "source": source}
    charge = await PixChargeRepository(session).by_txid(txid)
    if charge is None:
        log.warning("pix_payment_matches_no_charge", **context)
        return None
    link = await payment_links.lock_link(session, charge.link_id)
    context["customerId"] = link.customer_id
    paid = await pay_link_by_pix(
        session,
        link=link,
        amount=received.amount,
        end_to_end_id=received.end_to_end_id,
        context=context,
    )
    if paid is not None:
        charge.status, charge.updated_at = PAID, clock.now()
    return paid


async def reconcile_charges(
    database: Database, psp: ChargesAtPsp, now: datetime, limit: int
) -> int:
    """Ask the PSP about up to `limit` charges of open links and pay those it says were paid
    (a webhook that never came); how many links it paid."""
    async with database.session() as session:
        checking = await PixChargeRepository(session).active_to_check(now, limit)
        txids = [charge.txid for charge in checking]
        await session.commit()
    paid = 0
    for txid in txids:
        try:
            answer = await psp.read(txid)
        except (PspUnreachable, PspRefused) as failed:
            log.warning("pix_charge_check_failed", txid=txid, error=str(failed))
            continue
        if not answer.paid:
            continue
        async with database.session() as session:
            for received in answer.paid:
                if await settle(session, txid=txid, received=received, source="reconciliation"):
                    paid += 1
                    break
            await session.commit()
    return paid
