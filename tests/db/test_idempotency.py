"""The idempotency store on each database, over both key tables: a live key replays its answer
for the same request and is the owner's conflict for another; an expired one is new again and
taken over; pruning deletes expired keys only, a batch at a time, oldest first."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import Table, func, select

from tucano.db.database import Database
from tucano.db.idempotency import IdempotencyStore
from tucano.ingest.models import EventIdempotencyKey
from tucano.payment_links.models import IdempotencyKey

WINDOW = timedelta(hours=1)
NOW = datetime(2030, 5, 1, 12, tzinfo=UTC)


class KeyConflict(Exception):
    pass


@dataclass(frozen=True)
class KeyTable:
    """A store over one key table, and how to make a new owner and key of its kinds (tests
    share one database per module, so each takes its own)."""

    store: IdempotencyStore
    new_owner: Callable[[], Any]
    new_key: Callable[[], Any]


def _store(table: Any, owner: str) -> IdempotencyStore:
    return IdempotencyStore(
        table=cast(Table, table), owner=owner, window=WINDOW, conflict=KeyConflict
    )


KEY_TABLES = {
    "payment_links": KeyTable(
        _store(IdempotencyKey.__table__, "customer_id"),
        lambda: uuid.uuid4().int % 2**62,
        uuid.uuid4,
    ),
    "events": KeyTable(
        _store(EventIdempotencyKey.__table__, "client_id"),
        lambda: uuid.uuid4().hex,
        lambda: f"key-{uuid.uuid4()}",
    ),
}


@pytest.fixture(params=list(KEY_TABLES))
def keys(request: pytest.FixtureRequest) -> KeyTable:
    return KEY_TABLES[request.param]


async def remember(
    database: Database, store: IdempotencyStore, owner: Any, key: Any, **values: Any
) -> bool:
    values = {"fingerprint": "first", "answer": b'{"n": 1}', "now": NOW, **values}
    async with database.session() as session:
        stored = await store.remember(session, owner=owner, key=key, **values)
        await session.commit()
    return stored


async def find(
    database: Database,
    store: IdempotencyStore,
    owner: Any,
    key: Any,
    fingerprints: tuple[str, ...] = ("first",),
    now: datetime = NOW,
) -> bytes | None:
    async with database.session() as session:
        return await store.find(session, owner=owner, key=key, fingerprints=fingerprints, now=now)


async def test_a_new_key_finds_nothing(private_database: Database, keys: KeyTable) -> None:
    store, owner, key = keys.store, keys.new_owner(), keys.new_key()
    assert await find(private_database, store, owner, key) is None


async def test_a_live_key_replays_the_same_request_and_refuses_another(
    private_database: Database, keys: KeyTable
) -> None:
    store, owner, key = keys.store, keys.new_owner(), keys.new_key()
    assert await remember(private_database, store, owner, key)
    later = NOW + WINDOW - timedelta(seconds=1)
    assert await find(private_database, store, owner, key, now=later) == b'{"n": 1}'
    # Any of the request's fingerprints (an earlier release's spelling, say) is the same request.
    assert await find(private_database, store, owner, key, ("other", "first")) == b'{"n": 1}'
    with pytest.raises(KeyConflict):
        await find(private_database, store, owner, key, ("second",))


async def test_a_live_key_keeps_its_place(private_database: Database, keys: KeyTable) -> None:
    store, owner, key = keys.store, keys.new_owner(), keys.new_key()
    assert await remember(private_database, store, owner, key)
    again = NOW + timedelta(minutes=5)
    assert not await remember(
        private_database, store, owner, key, fingerprint="second", answer=b"{}", now=again
    )
    assert await find(private_database, store, owner, key, now=again) == b'{"n": 1}'


async def test_an_expired_key_is_new_and_taken_over(
    private_database: Database, keys: KeyTable
) -> None:
    store, owner, key = keys.store, keys.new_owner(), keys.new_key()
    assert await remember(private_database, store, owner, key)
    expired = NOW + WINDOW
    assert await find(private_database, store, owner, key, ("second",), now=expired) is None
    assert await remember(
        private_database, store, owner, key, fingerprint="second", answer=b"{}", now=expired
    )
    assert await find(private_database, store, owner, key, ("second",), now=expired) == b"{}"


async def test_keys_are_per_owner(private_database: Database, keys: KeyTable) -> None:
    store, owner, key = keys.store, keys.new_owner(), keys.new_key()
    other_owner = keys.new_owner()
    assert await remember(private_database, store, owner, key)
    assert await find(private_database, store, other_owner, key, ("second",)) is None
    assert await remember(private_database, store, other_owner, key, fingerprint="second")


async def test_pruning_deletes_expired_keys_a_batch_at_a_time(
    private_database: Database, keys: KeyTable
) -> None:
    store, owner, new_key = keys.store, keys.new_owner(), keys.new_key
    long_ago = datetime(2001, 1, 1, tzinfo=UTC)
    oldest, newest, live = new_key(), new_key(), new_key()
    await remember(private_database, store, owner, oldest, now=long_ago)
    await remember(private_database, store, owner, newest, now=long_ago + timedelta(minutes=1))
    await remember(private_database, store, owner, live, now=long_ago + timedelta(minutes=90))
    at = long_ago + timedelta(hours=2)
    pruned = []
    for _ in range(3):
        async with private_database.session() as session:
            pruned.append(await store.prune(session, now=at, batch_size=1))
            await session.commit()
    # Nothing else in this database is that old: the two expired keys, oldest first.
    assert pruned == [1, 1, 0]
    async with private_database.session() as session:
        left = await session.scalar(
            select(func.count()).select_from(store.table).where(store.table.c[store.owner] == owner)
        )
    assert left == 1
    assert await find(private_database, store, owner, live, now=at) == b'{"n": 1}'


def test_a_stored_row_replays_only_for_its_request() -> None:
    store = KEY_TABLES["events"].store
    assert store.replay(None, ("first",)) is None
    assert store.replay(("first", '{"n": 1}'), ("first",)) == b'{"n": 1}'
    with pytest.raises(KeyConflict):
        store.replay(("first", '{"n": 1}'), ("second",))
