"""The process set-up of `tucano serve` and `tucano worker`: the open-files limit, and what a
worker's slow attempts may hold of it. In subprocesses, so the test run keeps its own limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

_, HARD = resource.getrlimit(resource.RLIMIT_NOFILE)
PLENTY = 100_000 if HARD == resource.RLIM_INFINITY else HARD

pytestmark = pytest.mark.skipif(PLENTY < 4096, reason="needs a hard open-files limit of 4096+")


def run_with_soft_limit(soft: int, code: str) -> str:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, HARD))

    done = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lower,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_serve_and_worker_raise_the_soft_open_files_limit_to_the_hard_one() -> None:
    printed = run_with_soft_limit(
        256,
        "import resource; from tucano.runtime import raise_open_files_limit; "
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], raise_open_files_limit(), "
        "resource.getrlimit(resource.RLIMIT_NOFILE)[0])",
    )
    if HARD == resource.RLIM_INFINITY:
        assert printed.split()[:2] == ["256", str(1 << 20)]  # no limit left: "a large number"
    else:
        assert printed.split() == ["256", str(HARD), str(HARD)]


def test_slow_attempts_keep_to_half_the_open_files_a_worker_may_have() -> None:
    code = (
        "from tucano.config import Settings; from tucano.db.database import Database; "
        "from tucano.deliveries.worker.loop import DeliveryWorker; "
        "s = Settings(_env_file=None, database_url='sqlite+aiosqlite:///unused.db', "
        "delivery_concurrency=64); "
        "print(DeliveryWorker(Database(s.database_url), s).senders.max_slow_attempts)"
    )
    # 400 open files: 200 for the worker's sockets, 64 of them its pool's.
    assert run_with_soft_limit(400, code) == "136"
    # Plenty: 16 slow attempts per sender of the pool.
    assert run_with_soft_limit(PLENTY, code) == str(16 * 64)


@pytest.mark.parametrize(("call_it", "at_least", "at_most"), [(True, 64, 1000), (False, 1, 20)])
def test_the_event_loop_resolves_hosts_on_many_threads(
    call_it: bool, at_least: int, at_most: int
) -> None:
    # A host slow to resolve holds one of these threads for seconds: four (libuv's default)
    # let a few such hosts stall every delivery's lookup.
    code = (
        "import asyncio, os, uvloop; from tucano.runtime import size_resolver_threads\n"
        f"{'size_resolver_threads()' if call_it else 'pass'}\n"
        "async def main():\n"
        "    await asyncio.get_running_loop().getaddrinfo('localhost', 80)\n"
        "    print(len(os.listdir('/proc/self/task')))\n"
        "uvloop.run(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "UV_THREADPOOL_SIZE"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert at_least <= int(done.stdout) <= at_most
