"""The LISTEN connection of db.notifications: its log while it cannot connect, and its pace
when the server keeps ending it. No database."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from tucano.db import notifications


def test_an_outage_of_the_listener_is_a_line_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1000.0
    monkeypatch.setattr(notifications.time, "monotonic", lambda: now)
    outage = notifications.ListenerOutage()
    with capture_logs() as logs:
        for _ in range(30):  # a try a second
            outage.failed("ConnectionRefusedError")
        now += 61
        outage.failed("ConnectionRefusedError")
        outage.over()
    assert [(e["event"], e["failuresInARow"]) for e in logs] == [
        ("notification_listener_down", 1),
        ("notification_listener_down", 31),
        ("notification_listener_resumed", 31),
    ]


async def test_a_connection_that_keeps_dropping_is_tried_again_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connects = 0

    class DroppedAtOnce:
        """A connection the server ends as soon as it is made."""

        def add_termination_listener(self, callback: Any) -> None:
            callback(self)

        async def add_listener(self, *_args: Any) -> None:
            return None

        def is_closed(self) -> bool:
            return True

        def terminate(self) -> None:
            return None

    async def connect(*_args: Any, **_kwargs: Any) -> DroppedAtOnce:
        nonlocal connects
        connects += 1
        return DroppedAtOnce()

    monkeypatch.setattr(notifications, "connect_asyncpg", connect)
    stop = asyncio.Event()
    listener = asyncio.create_task(
        notifications.listen(
            "postgresql://x", {}, stop, on_listening=lambda _again: None, on_lost=lambda: None
        )
    )
    await asyncio.sleep(1.5)
    stop.set()
    await asyncio.wait_for(listener, timeout=5)
    assert 1 <= connects <= 3, connects  # not a loop of reconnections
