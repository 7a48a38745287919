"""The process set-up of `tucano serve` and `tucano worker`: the open-files limit, and what a
worker's slow attempts may hold of it. In subprocesses, so the test run keeps its own limit."""

from __future__ import annotations

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
        "from tucano.config import Settings; from tucano.db import Database; "
        "from tucano.deliveries.worker import DeliveryWorker; "
        "s = Settings(_env_file=None, database_url='sqlite+aiosqlite:///unused.db', "
        "delivery_concurrency=64); "
        "print(DeliveryWorker(Database(s.database_url), s)._most_slow)"
    )
    # 400 open files: 200 for the worker's sockets, 64 of them its pool's.
    assert run_with_soft_limit(400, code) == "136"
    # Plenty: 16 slow attempts per sender of the pool.
    assert run_with_soft_limit(PLENTY, code) == str(16 * 64)
