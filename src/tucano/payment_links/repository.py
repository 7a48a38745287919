"""Every statement on one payment link at a time: links, their payments, and the idempotency
keys of their creation (lists and reports are listing_repository's, day totals
totals_repository's)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from sqlalchemy import Table, and_, bindparam, exists, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY

from tucano.core.errors import Conflict, ErrorCode
from tucano.db.database import Database
from tucano.db.idempotency import IdempotencyStore
from tucano.db.postgres import Compiled, coalesced, driver_connection
from tucano.db.repository import Repository
from tucano.payment_links.listing_repository import LINK_WITH_PAYMENT
from tucano.payment_links.matching import LINKS, PAYMENTS
from tucano.payment_links.models import IdempotencyKey, Payment, PaymentLink
from tucano.payment_links.totals_repository import (
    CHANGE_COLUMNS,
    CHANGES,
    UNPAID,
    DayTotalRepository,
    change,
)


class CreationKey(Protocol):
    """An x-transaction-id of a customer, and the fingerprint of the request it came with."""

    @property
    def customer_id(self) -> int: ...
    @property
    def key(self) -> uuid.UUID: ...
    @property
    def fingerprint(self) -> str: ...


# How long a customer's x-transaction-id of a create is remembered.
IDEMPOTENCY_WINDOW = timedelta(hours=24)


def idempotency_conflict() -> Conflict:
    return Conflict(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "this x-transaction-id created a payment link with a different body in the last "
        "24 hours; send a new UUID for a new link",
    )


CREATION_KEYS = IdempotencyStore(
    table=cast(Table, IdempotencyKey.__table__),
    owner="customer_id",
    window=IDEMPOTENCY_WINDOW,
    conflict=idempotency_conflict,
)
# What a new link has (its id the database's).
_NEW_LINK_COLUMNS = [column for column in LINKS.c if column.key != "id"]
_INSERT_LINK = insert(LINKS)
# A link and its payment (None until paid), as ORM objects.
_LINK_AND_PAYMENT = select(PaymentLink, Payment).outerjoin(
    Payment, Payment.link_id == PaymentLink.id
)
# A link with its payment's columns, for display; built once (the most frequent statement).
_READ = (
    select(*LINK_WITH_PAYMENT)
    .outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
    .where(
        LINKS.c.uuid == bindparam("link_uuid", type_=LINKS.c.uuid.type),
        LINKS.c.customer_id == bindparam("customer", type_=LINKS.c.customer_id.type),
    )
)


class PaymentLinkRepository(Repository[PaymentLink]):
    model = PaymentLink

    @classmethod
    async def create_and_commit(
        cls, database: Database, ref: CreationKey, *, link: PaymentLink, answer: bytes
    ) -> bytes:
        """Store `link` with `answer` kept for its x-transaction-id, committed, and return the
        answer to send: `answer`, or, when the key was used in the last 24 hours, the answer it
        had then (the conflict if that was for another request). One link per key, even when
        requests with the same key race. A transaction of its own: on PostgreSQL the key, the
        link and its day change go in one statement, with no session."""
        while True:
            if cls.accelerated_on(database):
                sent = await _create_on_postgresql(database, ref, link=link, answer=answer)
            else:
                async with database.session() as session:
                    sent = await cls(session)._create(ref, link=link, answer=answer)
                    await session.commit()
            if sent is not None:
                return sent
            # Its key expired in between being found live and read: a new request after all.

    async def _create(self, ref: CreationKey, *, link: PaymentLink, answer: bytes) -> bytes | None:
        replay = await self.find_creation(ref, now=link.created_at)
        if replay is not None:
            return replay
        if not await self.remember_creation(ref, answer=answer, now=link.created_at):
            return None
        await self.session.execute(_INSERT_LINK, _new_link_values(link))
        await DayTotalRepository(self.session).record_created(link)
        return answer

    @classmethod
    async def read_for_display(
        cls, database: Database, *, customer_id: int, link_uuid: uuid.UUID
    ) -> Any | None:
        """The customer's link with its payment's columns (LINK_WITH_PAYMENT's names), for
        display; None for another customer's. A read of its own: on PostgreSQL, the most
        frequent request, reads that arrive together under load share one statement (each
        still seeing every write committed before it came), and no session is opened."""
        if cls.accelerated_on(database):
            return await coalesced(database, _read_links_on_postgresql, (customer_id, link_uuid))
        async with database.read_session() as session:
            values = {"link_uuid": link_uuid, "customer": customer_id}
            return (await session.execute(_READ, values)).first()

    async def get(
        self, *, customer_id: int, link_uuid: uuid.UUID, for_update: bool = False
    ) -> tuple[PaymentLink, Payment | None] | None:
        """The customer's link and its payment, as ORM objects for a change; with
        `for_update`, the link locked until the transaction ends."""
        statement = _LINK_AND_PAYMENT.where(
            PaymentLink.uuid == link_uuid, PaymentLink.customer_id == customer_id
        )
        if for_update:
            statement = statement.with_for_update(of=PaymentLink).execution_options(
                populate_existing=True
            )
        row = (await self.session.execute(statement)).first()
        return None if row is None else (row[0], row[1])

    async def find_for_checkout(
        self, link_uuid: uuid.UUID
    ) -> tuple[PaymentLink, Payment | None] | None:
        """A link and its payment by UUID alone, for the checkout page: its caller is the
        payer, whose checkout token (already verified) names the link, not a customer."""
        row = (
            await self.session.execute(_LINK_AND_PAYMENT.where(PaymentLink.uuid == link_uuid))
        ).first()
        return None if row is None else (row[0], row[1])

    async def get_for_update(self, link_id: int) -> PaymentLink | None:
        """A link by id, locked against other payments until the transaction ends."""
        return await self.session.get(
            PaymentLink, link_id, with_for_update=True, populate_existing=True
        )

    async def find_by_txid_for_update(self, *, customer_id: int, txid: str) -> PaymentLink | None:
        """The customer's link whose BR Code carries `txid`, locked until the transaction ends."""
        return await self.get_one_or_none(
            self.scoped(customer_id).where(PaymentLink.pix_txid == txid).with_for_update()
        )

    async def mark_paid(self, link_id: int, *, now: datetime) -> bool:
        """CREATED and not expired becomes PAID, in one statement, so two payments can never
        both succeed; whether it did."""
        paid = await self.session.execute(
            update(PaymentLink)
            .where(
                PaymentLink.id == link_id,
                PaymentLink.status == "CREATED",
                PaymentLink.expires_at > now,
            )
            .values(status="PAID", autopay_at=None)
            .execution_options(synchronize_session=False)
        )
        return getattr(paid, "rowcount", 0) == 1

    async def mark_cancelled(self, link_id: int, *, now: datetime) -> bool:
        """CREATED and not expired becomes CANCELLED, in one statement (a payment racing it
        finds the link cancelled, or the cancellation finds it paid); whether it did."""
        cancelled = await self.session.execute(
            update(PaymentLink)
            .where(
                PaymentLink.id == link_id,
                PaymentLink.status == "CREATED",
                PaymentLink.expires_at > now,
            )
            .values(status="CANCELLED", cancelled_at=now, autopay_at=None)
            .execution_options(synchronize_session=False)
        )
        return getattr(cancelled, "rowcount", 0) == 1

    async def expired_unannounced(self, *, now: datetime, limit: int) -> Sequence[PaymentLink]:
        """CREATED links past their expiry whose EXPIRED event has not been published, oldest
        expiry first, locked (those another process holds are skipped)."""
        return await self.all(
            select(PaymentLink)
            .where(
                PaymentLink.status == "CREATED",
                PaymentLink.expiry_announced_at.is_(None),
                PaymentLink.expires_at <= now,
            )
            .order_by(PaymentLink.expires_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )

    async def payment_of(self, link_id: int) -> Payment | None:
        return await self.get_one_or_none(select(Payment).where(Payment.link_id == link_id))

    async def refresh(self, link: PaymentLink) -> None:
        await self.session.refresh(link)

    async def add_payment(self, payment: Payment) -> Payment:
        self.session.add(payment)
        await self.session.flush()
        return payment

    async def due_autopayments(self, *, now: datetime, limit: int) -> Sequence[PaymentLink]:
        """Links whose sandbox automatic payment is due, locked (those another process holds
        are skipped)."""
        return await self.all(
            select(PaymentLink)
            .where(PaymentLink.autopay_at.is_not(None), PaymentLink.autopay_at <= now)
            .order_by(PaymentLink.autopay_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )

    async def find_creation(self, ref: CreationKey, *, now: datetime) -> bytes | None:
        """The answer kept for this x-transaction-id, if it is live (the conflict if it came
        with another request)."""
        return await CREATION_KEYS.find(
            self.session,
            owner=ref.customer_id,
            key=ref.key,
            fingerprints=(ref.fingerprint,),
            now=now,
        )

    async def remember_creation(self, ref: CreationKey, *, answer: bytes, now: datetime) -> bool:
        """Keep `answer` for this x-transaction-id; False when a concurrent request with it got
        there first."""
        return await CREATION_KEYS.remember(
            self.session,
            owner=ref.customer_id,
            key=ref.key,
            fingerprint=ref.fingerprint,
            answer=answer,
            now=now,
        )

    async def prune_creation_keys(self, *, now: datetime, batch_size: int) -> int:
        return await CREATION_KEYS.prune(self.session, now=now, batch_size=batch_size)


def _new_link_values(link: PaymentLink) -> dict[str, Any]:
    return {column.key: getattr(link, column.key) for column in _NEW_LINK_COLUMNS}


def _create_statement() -> Compiled:
    """PostgreSQL: the key, the link if the key went in, and its day change if the link did,
    in one statement (atomic by itself, in autocommit); it counts the links that went in."""
    key = CREATION_KEYS.remember_statement("postgresql").cte("key")
    link = (
        insert(LINKS)
        .from_select(
            [column.key for column in _NEW_LINK_COLUMNS],
            select(*(bindparam(f"link_{c.key}", type_=c.type) for c in _NEW_LINK_COLUMNS)).where(
                exists(select(key.c.key))
            ),
        )
        .returning(LINKS.c.id)
        .cte("link")
    )
    c = CHANGES.c
    counted = insert(CHANGES).from_select(
        list(CHANGE_COLUMNS),
        select(*(bindparam(f"change_{name}", type_=c[name].type) for name in CHANGE_COLUMNS)).where(
            exists(select(link.c.id))
        ),
    )
    return Compiled(select(func.count()).select_from(link).add_cte(counted.cte("counted")))


_CREATE_ON_POSTGRESQL = _create_statement()


async def _create_on_postgresql(
    database: Database, ref: CreationKey, *, link: PaymentLink, answer: bytes
) -> bytes | None:
    now = link.created_at
    values = {
        "owner": ref.customer_id,
        "key": ref.key,
        "fingerprint": ref.fingerprint,
        "answer": answer.decode(),
        "now": now,
        "window_start": now - IDEMPOTENCY_WINDOW,
        **{f"link_{name}": value for name, value in _new_link_values(link).items()},
        **{
            f"change_{name}": value
            for name, value in change(link, status="CREATED", method=UNPAID, sign=1).items()
        },
    }
    async with driver_connection(database) as connection:
        if (await _CREATE_ON_POSTGRESQL.first(connection, values))[0]:
            return answer
    # The key was live: the answer it holds (or None: it expired in between).
    async with database.read_session() as session:
        return await PaymentLinkRepository(session).find_creation(ref, now=now)


# PostgreSQL: the links of many (customer, link) pairs at once, the pairs as two arrays joined
# to the links they name (so the statement itself filters by customer).
_WANTED = (
    func.unnest(
        bindparam("link_uuids", type_=ARRAY(LINKS.c.uuid.type)),
        bindparam("customers", type_=ARRAY(LINKS.c.customer_id.type)),
    )
    .table_valued("uuid", "customer_id")
    .render_derived(name="wanted")
)
_READ_MANY = select(*LINK_WITH_PAYMENT).select_from(
    LINKS.join(
        _WANTED, and_(LINKS.c.uuid == _WANTED.c.uuid, LINKS.c.customer_id == _WANTED.c.customer_id)
    ).outerjoin(PAYMENTS, PAYMENTS.c.link_id == LINKS.c.id)
)
_READ_MANY_ON_POSTGRESQL = Compiled(_READ_MANY)


async def _read_links_on_postgresql(
    connection: Any, keys: list[tuple[int, uuid.UUID]]
) -> dict[tuple[int, uuid.UUID], Any]:
    rows = await _READ_MANY_ON_POSTGRESQL.all(
        connection,
        {"link_uuids": [key[1] for key in keys], "customers": [key[0] for key in keys]},
    )
    return {(row.customer_id, row.uuid): row for row in rows}
