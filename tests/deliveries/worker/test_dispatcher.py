"""The fair scheduler: hosts in turn, a cap per host, slow hosts, a clean close. No database."""

from __future__ import annotations

import asyncio

from tests.support.claims import add
from tucano.deliveries.worker.dispatcher import Dispatcher


async def test_hosts_take_turns_and_each_is_capped() -> None:
    dispatcher = Dispatcher(per_target=2)
    add(dispatcher, "https://a.example/x", 5, webhook_id=1)
    add(dispatcher, "https://b.example/y", 5, webhook_id=2)
    handed = [await dispatcher.next() for _ in range(4)]
    hosts = [target.key for _, target in (h for h in handed if h is not None)]
    # One of each in turn, and no more than two of a host at once.
    assert hosts == ["https://a.example", "https://b.example"] * 2
    assert dispatcher.running == 4 and dispatcher.waiting == 6

    # Both hosts are at their cap: a fifth sender waits until one of them finishes.
    fifth = asyncio.ensure_future(dispatcher.next())
    await asyncio.sleep(0.01)
    assert not fifth.done()
    first = handed[0]
    assert first is not None
    dispatcher.done(first[1], quick=True)
    got = await asyncio.wait_for(fifth, 1)
    assert got is not None and got[1].key == "https://a.example"


async def test_paths_of_one_host_share_its_cap() -> None:
    dispatcher = Dispatcher(per_target=1)
    add(dispatcher, "https://a.example/one", 1, webhook_id=1)
    add(dispatcher, "HTTPS://A.EXAMPLE/two", 1, webhook_id=2)
    assert await dispatcher.next() is not None
    assert dispatcher.running == 1 and dispatcher.waiting == 1
    waiting = asyncio.ensure_future(dispatcher.next())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    (target,) = dispatcher.targets.values()
    assert target.webhook_ids == {1, 2}
    waiting.cancel()


async def test_close_hands_back_what_was_not_started_and_wakes_idle_senders() -> None:
    dispatcher = Dispatcher(per_target=1)
    add(dispatcher, "https://a.example/x", 3)
    started = await dispatcher.next()
    assert started is not None
    idle = asyncio.ensure_future(dispatcher.next())
    await asyncio.sleep(0.01)

    given_back = dispatcher.take_waiting()
    assert len(given_back) == 2
    dispatcher.close()
    assert await asyncio.wait_for(idle, 1) is None
    assert await dispatcher.next() is None
    # The delivery in flight still finishes, and then the host is forgotten.
    dispatcher.done(started[1], quick=True)
    assert dispatcher.targets == {} and dispatcher.running == 0 and dispatcher.waiting == 0


async def test_a_slow_host_is_counted_apart_until_one_of_its_attempts_is_quick() -> None:
    dispatcher = Dispatcher(per_target=2)
    add(dispatcher, "https://hangs.example/x", 5, webhook_id=1)
    add(dispatcher, "https://fine.example/y", 3, webhook_id=2)
    handed = [await dispatcher.next() for _ in range(4)]
    hanging = [h for h in handed if h is not None and h[1].key == "https://hangs.example"]
    assert len(hanging) == 2
    target = hanging[0][1]
    dispatcher.mark_slow(target)
    # What is held for it (2 in flight, 3 waiting) is the slow hosts' share; the other's is not.
    assert dispatcher.held_for_slow_targets() == 5

    dispatcher.done(target, quick=False)  # another slow attempt: still slow
    assert target.slow and dispatcher.held_for_slow_targets() == 4
    dispatcher.done(target, quick=True)  # a quick one: no longer slow
    assert not target.slow and dispatcher.held_for_slow_targets() == 0


async def test_a_slow_host_with_nothing_left_is_forgotten() -> None:
    dispatcher = Dispatcher(per_target=2)
    add(dispatcher, "https://hangs.example/x", 1)
    handed = await dispatcher.next()
    assert handed is not None
    dispatcher.mark_slow(handed[1])
    dispatcher.done(handed[1], quick=False)
    assert dispatcher.targets == {} and dispatcher.slow == set()
    assert dispatcher.held_for_slow_targets() == 0
