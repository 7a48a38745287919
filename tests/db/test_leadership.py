"""db.leadership: one leader at a time on PostgreSQL, a standby taking over once the leader's
connection is gone (as when its process is killed), and always the leader on SQLite."""

from __future__ import annotations

import os
import random

import pytest

from tests.support.settings import POSTGRES_URL
from tucano.db.engines import connect_asyncpg
from tucano.db.leadership import Leadership

postgres_only = pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")


def _pair() -> tuple[Leadership, Leadership]:
    key = random.randrange(1, 2**31)  # a lock of this test's own
    # Probing at every call, so that a lost connection is found at the next.
    return (
        Leadership(POSTGRES_URL, key=key, name="test-leader", probe_seconds=0),
        Leadership(POSTGRES_URL, key=key, name="test-leader", probe_seconds=0),
    )


async def _leaders_seen() -> list[str]:
    connection = await connect_asyncpg(POSTGRES_URL)
    try:
        rows = await connection.fetch(
            "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE "
            "'test-leader %'"
        )
        return [row[0] for row in rows]
    finally:
        await connection.close()


@postgres_only
async def test_only_one_leads_and_its_connection_names_its_process() -> None:
    first, second = _pair()
    try:
        assert await first.lead()
        assert not await second.lead()
        assert await first.lead()  # still
        assert await _leaders_seen() == [f"test-leader {os.getpid()}"]
    finally:
        await first.step_down()
        await second.step_down()


@postgres_only
async def test_a_standby_leads_once_the_leader_steps_down() -> None:
    first, second = _pair()
    try:
        assert await first.lead()
        assert not await second.lead()
        await first.step_down()
        assert await second.lead()
        assert not await first.lead()
    finally:
        await first.step_down()
        await second.step_down()


@postgres_only
async def test_a_leader_whose_connection_is_killed_lets_a_standby_lead() -> None:
    first, second = _pair()
    try:
        assert await first.lead()
        # What the server sees when the leader's process dies: its connection ends.
        admin = await connect_asyncpg(POSTGRES_URL)
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = $1",
                f"test-leader {os.getpid()}",
            )
        finally:
            await admin.close()
        assert await second.lead()
        assert not await first.lead()
    finally:
        await first.step_down()
        await second.step_down()


async def test_on_sqlite_every_process_leads() -> None:
    leadership = Leadership("sqlite+aiosqlite:///x.db", key=1, name="test-leader")
    assert await leadership.lead()
    await leadership.step_down()
