"""The statements a person's view of the delivery history needs beyond the results list: one
event's attempts, and attempts per hour from the hour counts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, func, select

from tucano.db.repository import Repository
from tucano.deliveries.models import DeliveryResult, DeliveryResultCount, ResultStatus

COUNTS = cast(Table, DeliveryResultCount.__table__)
# The statuses that say how the receiver did (FAILED is a delivery cancelled, never sent).
ABOUT_THE_RECEIVER = (ResultStatus.SUCCESS, ResultStatus.PENDING_RETRY, ResultStatus.EXHAUSTED)


class HistoryRepository(Repository[DeliveryResult]):
    model = DeliveryResult

    async def attempts_of_event(
        self,
        *,
        customer_id: int,
        event_id: str,
        event_type: str,
        since: datetime,
        limit: int,
    ) -> Sequence[DeliveryResult]:
        """The first `limit` attempts of one of the customer's events, oldest first. Read
        through the customer's results of the event's type from `since` (the event's creation):
        delivery_results has no index by event, and one more on every attempt's insert would
        cost every delivery for the sake of this page."""
        return await self.all(
            self.scoped(customer_id)
            .where(
                DeliveryResult.event_type == event_type,
                DeliveryResult.attempted_at >= since,
                DeliveryResult.event_id == event_id,
            )
            .order_by(DeliveryResult.attempted_at, DeliveryResult.id)
            .limit(limit)
        )

    async def attempts_by_hour(
        self, *, customer_id: int, webhook_id: int | None, since_hour: int
    ) -> list[tuple[int, str, int]]:
        """(hour, status, attempts) of the customer's results about the receiver from the hour
        `since_hour` on, of one webhook or all, added up from the hour counts."""
        counts = COUNTS.c
        condition = [
            counts.customer_id == customer_id,
            counts.hour >= since_hour,
            counts.status.in_(ABOUT_THE_RECEIVER),
        ]
        if webhook_id is not None:
            condition.append(counts.webhook_id == webhook_id)
        rows = await self.session.execute(
            select(counts.hour, counts.status, func.sum(counts.result_count))
            .where(*condition)
            .group_by(counts.hour, counts.status)
        )
        return [(int(hour), str(status), int(n or 0)) for hour, status, n in rows]
