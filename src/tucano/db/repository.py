"""The base of every feature's repository: the one way a feature reaches its tables.

A repository wraps the session of the work at hand (a request, a job, a CLI command) and holds
every statement of its feature; services call its methods and never write SQL. Statements on a
customer's rows start from `scoped`, so no query of such a table forgets the tenant. What
differs between SQLite and PostgreSQL is decided here (`on_postgresql`) or in db/, never above.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tucano.db.database import Database

M = TypeVar("M")
T = TypeVar("T")

# SQLite takes at most 32,766 parameters: a longer list of ids (a webhook's whole backlog, say)
# is asked for in parts.
IDS_PER_STATEMENT = 10_000


def in_parts(items: Sequence[T], size: int = IDS_PER_STATEMENT) -> Iterator[Sequence[T]]:
    """`items` in consecutive parts of at most `size`, for IN lists."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Repository(Generic[M]):
    """Statements on one model's table (and those a feature reads beside it)."""

    model: ClassVar[type[Any]]
    # Whether PostgreSQL's accelerators (db/postgres.py) run where a method has one; a
    # benchmark (bench/accelerators.py) turns them off to measure what each saves.
    tuned: ClassVar[bool] = True

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @property
    def on_postgresql(self) -> bool:
        """Whether the session is on PostgreSQL (else SQLite): the one place a repository asks."""
        return self.session.get_bind().dialect.name == "postgresql"

    @property
    def accelerated(self) -> bool:
        """Whether a method with a PostgreSQL accelerator runs it here."""
        return self.tuned and self.on_postgresql

    @classmethod
    def accelerated_on(cls, database: Database) -> bool:
        """Whether a method that opens its own connection runs its PostgreSQL accelerator."""
        return cls.tuned and database.dialect == "postgresql"

    def scoped(self, customer_id: int) -> Select[M]:
        """SELECT the model's rows of one customer: the start of every tenant's query."""
        return select(self.model).where(self.model.customer_id == customer_id)

    async def get_one_or_none(self, statement: Select[T]) -> T | None:
        return (await self.session.execute(statement)).scalars().one_or_none()

    async def all(self, statement: Select[T]) -> Sequence[T]:
        return (await self.session.execute(statement)).scalars().all()

    async def page(
        self, statement: Select[Any], *, offset: int, limit: int
    ) -> tuple[Sequence[Any], int]:
        """One page of `statement`'s rows (its ORDER BY kept) and how many rows it has in all,
        counted beside the page in the same statement (one round trip, one snapshot); a page
        past the end counts on its own. Items are what the statement selects: the entity or
        value when it selects one, else a tuple of its columns in order."""
        counted = statement.add_columns(func.count().over().label("matched_total"))
        rows = (await self.session.execute(counted.offset(offset).limit(limit))).all()
        if rows:
            single = len(rows[0]) == 2
            return [row[0] if single else tuple(row[:-1]) for row in rows], int(rows[0][-1])
        total = await self.session.scalar(
            select(func.count()).select_from(statement.order_by(None).subquery())
        )
        return [], int(total or 0)
