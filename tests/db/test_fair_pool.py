"""Connections are handed out in the order they were asked for (db/fair_pool.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tucano.db.engines import create_engine
from tucano.db.fair_pool import FirstComePool, FirstComeQueue


async def _one_connection_engine(tmp_path: Path) -> AsyncEngine:
    return create_async_engine(
        f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}",
        poolclass=FirstComePool,
        pool_size=1,
        max_overflow=0,
        pool_timeout=5,
    )


async def test_waiting_requests_get_the_connection_in_the_order_they_asked(
    tmp_path: Path,
) -> None:
    engine = await _one_connection_engine(tmp_path)
    order: list[str] = []

    async def use(name: str) -> None:
        async with engine.connect() as connection:
            order.append(name)
            await connection.execute(text("SELECT 1"))

    try:
        holder = await engine.connect()
        waiters = [asyncio.create_task(use(f"waiter {n}")) for n in range(3)]
        await asyncio.sleep(0.05)  # all three are in line for the one connection
        await holder.close()
        # Asks again at once, before the first waiter has woken up: with asyncio.Queue it
        # would take back the connection it has just returned, ahead of the three.
        await use("newcomer")
        await asyncio.gather(*waiters)
    finally:
        await engine.dispose()
    assert order == ["waiter 0", "waiter 1", "waiter 2", "newcomer"]


async def test_a_request_that_timed_out_waiting_loses_no_connection(tmp_path: Path) -> None:
    engine = create_async_engine(
        f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}",
        poolclass=FirstComePool,
        pool_size=1,
        max_overflow=0,
        pool_timeout=0.05,
    )
    try:
        holder = await engine.connect()
        with pytest.raises(Exception, match="QueuePool limit"):
            await engine.connect()
        await holder.close()
        # The connection came back to the pool, not to the request that gave up.
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()


async def test_an_item_handed_to_a_cancelled_getter_goes_to_the_next() -> None:
    queue = FirstComeQueue(2)
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait("connection")  # handed to the first getter...
    first.cancel()  # ...which is cancelled before it runs
    assert await second == "connection"
    assert first.cancelled()
    assert queue.empty()


async def test_items_wait_only_when_nobody_waits_for_them() -> None:
    queue = FirstComeQueue(2)
    queue.put_nowait("a")
    queue.put_nowait("b")
    with pytest.raises(asyncio.QueueFull):
        queue.put_nowait("c")
    assert [queue.get_nowait(), await queue.get()] == ["a", "b"]
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()


@pytest.mark.parametrize("read_only", [False, True])
async def test_tucanos_sqlite_engines_use_it(tmp_path: Path, read_only: bool) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}", read_only=read_only)
    try:
        assert isinstance(engine.pool, FirstComePool)
    finally:
        await engine.dispose()
