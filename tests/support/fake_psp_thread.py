"""The fake PSP on an event loop of its own in a background thread, for synchronous tests that
run Tucano as a process (`tucano serve`), where no test loop is there to serve it.

Read the state and call the plain controls (`fail_with`, `hang`, `expire`, ...) on `.psp`; the
coroutine controls have blocking twins here. Do not use it from an async test whose own loop
serves Tucano: a blocking `pay` would wait for a webhook answer that loop cannot give; use
`fake_psp` there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from tests.support.fake_psp import FakePsp, PspCall
from tests.support.fake_psp_api import Notification, RefundStatus

T = TypeVar("T")


class FakePspThread:
    def __init__(self, directory: Path, **options: Any) -> None:
        self.psp = FakePsp(directory, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-psp", daemon=True)

    def run(self, work: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run `work` on the fake's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    def start(self) -> FakePspThread:
        self._thread.start()
        self.run(self.psp.start())
        return self

    def stop(self) -> None:
        try:
            self.run(self.psp.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def pay(
        self,
        txid: str,
        amount: Decimal | str | None = None,
        *,
        notify: bool = True,
        force: bool = False,
        info_pagador: str | None = None,
        paid_at: datetime | None = None,
    ) -> dict[str, Any]:
        return self.run(
            self.psp.pay(
                txid,
                amount,
                notify=notify,
                force=force,
                info_pagador=info_pagador,
                paid_at=paid_at,
            )
        )

    def settle_refund(
        self,
        end_to_end_id: str,
        refund_id: str,
        *,
        status: RefundStatus = "DEVOLVIDO",
        motivo: str | None = None,
        notify: bool = True,
    ) -> dict[str, Any]:
        return self.run(
            self.psp.settle_refund(
                end_to_end_id, refund_id, status=status, motivo=motivo, notify=notify
            )
        )

    def post_webhook(
        self, body: Any, *, url: str | None = None, chave: str | None = None
    ) -> Notification:
        return self.run(self.psp.post_webhook(body, url=url, chave=chave))

    def down(self) -> None:
        self.run(self.psp.down())

    def up(self) -> None:
        self.run(self.psp.up())

    def wait_for_calls(
        self, method: str | None, route: str | None, count: int = 1, timeout: float = 15
    ) -> list[PspCall]:
        """As FakePsp.wait_for_calls, blocking."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answered = [c for c in self.psp.calls_to(method, route) if c.status is not None]
            if len(answered) >= count:
                return answered
            time.sleep(0.02)
        raise AssertionError(f"fewer than {count} {method} {route} calls after {timeout}s")


@contextlib.contextmanager
def fake_psp_in_thread(directory: Path, **options: Any) -> Iterator[FakePspThread]:
    """A started fake PSP on a thread of its own, its files under `directory`."""
    running = FakePspThread(directory, **options).start()
    try:
        yield running
    finally:
        running.stop()
