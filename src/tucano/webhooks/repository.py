"""Every statement on the webhooks table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, delete, func, select, text, update

from tucano.db.database import Database
from tucano.db.postgres import Compiled, driver_connection
from tucano.db.repository import Repository, in_parts
from tucano.events.types import EventType
from tucano.webhooks.models import Webhook

WEBHOOKS = cast(Table, Webhook.__table__)
# What a list shows of each webhook.
LISTED = tuple(
    WEBHOOKS.c[name]
    for name in ("id", "customer_id", "partner_id", "target_url", "event_type", "is_active")
)


def _listed(*, by_event_type: bool) -> tuple[Select[Any], Select[Any]]:
    """A page of a customer's webhooks with how many there are in all beside each row, and
    the count alone; built once per filter, since building a statement costs more than running
    it."""
    condition = [WEBHOOKS.c.customer_id == bindparam("customer")]
    if by_event_type:
        condition.append(WEBHOOKS.c.event_type == bindparam("event_type"))
    page = (
        select(*LISTED, func.count().over().label("matched_total"))
        .where(*condition)
        .order_by(WEBHOOKS.c.id)
        .offset(bindparam("offset"))
        .limit(bindparam("limit"))
    )
    return page, select(func.count()).select_from(WEBHOOKS).where(*condition)


_LISTED = {by_type: _listed(by_event_type=by_type) for by_type in (False, True)}
_LISTED_ON_POSTGRESQL = {
    by_type: (Compiled(page), Compiled(count)) for by_type, (page, count) in _LISTED.items()
}


class WebhookRepository(Repository[Webhook]):
    model = Webhook

    async def get(
        self, *, customer_id: int, webhook_id: int, for_update: bool = False
    ) -> Webhook | None:
        """The customer's webhook, or None (another customer's too). `for_update` locks its
        row until the transaction ends (SQLite's write transaction holds the whole database
        already)."""
        statement = self.scoped(customer_id).where(Webhook.id == webhook_id)
        if for_update:
            statement = statement.with_for_update()
        return await self.get_one_or_none(statement)

    @classmethod
    async def page_of(
        cls,
        database: Database,
        *,
        customer_id: int,
        event_type: EventType | None,
        offset: int,
        limit: int,
    ) -> tuple[Sequence[Any], int]:
        """A page of the customer's webhooks (of `event_type`, if given) in id order (rows of
        LISTED's columns), and how many there are in all, counted beside the page (a customer
        has few webhooks). A read of its own: on PostgreSQL, a frequent request, run straight
        on a driver connection, with no session."""
        by_type = event_type is not None
        values = {
            "customer": customer_id,
            "event_type": None if event_type is None else event_type.value,
            "offset": offset,
            "limit": limit,
        }
        if cls.accelerated_on(database):
            page_read, count_read = _LISTED_ON_POSTGRESQL[by_type]
            async with driver_connection(database) as connection:
                rows: Sequence[Any] = await page_read.all(connection, values)
                if rows:
                    return rows, int(rows[0].matched_total)
                return [], int((await count_read.first(connection, values))[0])
        page, count = _LISTED[by_type]
        async with database.read_session() as session:
            rows = (await session.execute(page, values)).all()
            if rows:
                return rows, int(rows[0].matched_total)
            # Past the last page (or none): the total alone.
            return [], int(await session.scalar(count, values) or 0)

    async def count_with_lock(self, customer_id: int) -> int:
        """How many webhooks the customer has, under a lock per customer held until the
        transaction ends, so that two creates at a limit cannot both see room (SQLite's write
        transaction holds the whole database already)."""
        if self.on_postgresql:
            await self.session.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                {"key": f"tucano.webhooks.of_customer.{customer_id}"},
            )
        count = await self.session.scalar(
            select(func.count()).select_from(Webhook).where(Webhook.customer_id == customer_id)
        )
        return int(count or 0)

    async def add(self, webhook: Webhook) -> Webhook:
        self.session.add(webhook)
        await self.session.flush()
        return webhook

    async def delete(self, *, customer_id: int, webhook_id: int) -> bool:
        """Delete the customer's webhook; whether there was one."""
        result = await self.session.execute(
            delete(Webhook).where(Webhook.id == webhook_id, Webhook.customer_id == customer_id)
        )
        return bool(getattr(result, "rowcount", 0))

    async def existing_ids(self, webhook_ids: Iterable[int]) -> set[int]:
        """Which of these webhooks still exist (the others were deleted)."""
        existing: set[int] = set()
        for part in in_parts(list(set(webhook_ids))):
            existing.update(
                await self.session.scalars(select(Webhook.id).where(Webhook.id.in_(part)))
            )
        return existing

    async def deactivate_failing(
        self, *, failing_since: datetime, reason: str, now: datetime
    ) -> list[int]:
        """Deactivate every active webhook whose run of failures began at or before
        `failing_since`, in one statement that checks and switches off together (a success
        recorded meanwhile keeps the webhook on; of several processes at once, only the one
        that switched a webhook off names it)."""
        return list(
            await self.session.scalars(
                update(Webhook)
                .where(
                    Webhook.is_active.is_(True),
                    Webhook.failing_since.is_not(None),
                    Webhook.failing_since <= failing_since,
                )
                .values(
                    is_active=False, deactivated_at=now, deactivation_reason=reason, updated_at=now
                )
                .returning(Webhook.id),
                execution_options={"synchronize_session": False},
            )
        )

    async def every_webhook_for_update(self) -> Sequence[Webhook]:
        """Every customer's webhooks, locked until the transaction ends (an operator's command
        that reseals every secret)."""
        return await self.all(select(Webhook).order_by(Webhook.id).with_for_update())

    async def delivery_health_for_update(
        self, webhook_ids: Sequence[int]
    ) -> list[tuple[int, datetime | None, datetime | None]]:
        """(id, last success, failing since) of these webhooks, locked in id order until the
        transaction ends (FOR NO KEY UPDATE on PostgreSQL: publishers' key-share locks on the
        same rows do not wait for it)."""
        rows = await self.session.execute(
            select(Webhook.id, Webhook.last_success_at, Webhook.failing_since)
            .where(Webhook.id.in_(webhook_ids))
            .order_by(Webhook.id)
            .with_for_update(key_share=True)
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def set_delivery_health(
        self, health: Sequence[tuple[int, datetime | None, datetime | None]]
    ) -> None:
        """Set (id, last success, failing since) of each webhook."""
        if health:
            await self.session.execute(
                update(WEBHOOKS)
                .where(WEBHOOKS.c.id == bindparam("b_id"))
                .values(last_success_at=bindparam("b_last"), failing_since=bindparam("b_failing")),
                [
                    {"b_id": webhook_id, "b_last": last, "b_failing": failing}
                    for webhook_id, last, failing in health
                ],
            )
