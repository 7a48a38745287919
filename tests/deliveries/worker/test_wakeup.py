"""The PostgreSQL listener that wakes workers: it notices a connection gone silent and connects
again. PostgreSQL only."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from sqlalchemy.engine import make_url

from tests.support.settings import POSTGRES_URL
from tucano.db.engines import connect_asyncpg
from tucano.deliveries.worker.wakeup import NOTIFY_CHANNEL, listen_for_notifications, wakeup
from tucano.webhooks.changes import WebhookChange, webhook_changes

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set"),
]


class SilencingProxy:
    """Relays TCP to PostgreSQL. `silence()` stops relaying on the connections open so far and
    keeps their sockets open: what a NAT or firewall that forgot a connection looks like to both
    ends. Connections made afterwards are relayed."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.connections = 0
        self._silenced_before = 0
        self._server: asyncio.Server | None = None
        self._sockets: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def silence(self) -> None:
        self._silenced_before = self.connections

    async def stop(self) -> None:
        for writer in self._sockets:
            writer.close()
        if self._server is not None:
            self._server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        self._sockets += [writer, up_writer]

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    if number > self._silenced_before:  # else: dropped, the socket kept open
                        sink.write(data)
                        await sink.drain()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


async def test_a_listener_whose_connection_went_silent_connects_again() -> None:
    url = make_url(POSTGRES_URL)
    proxy = SilencingProxy(url.host or "127.0.0.1", url.port or 5432)
    port = await proxy.start()
    through_proxy = url.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    notifier = await connect_asyncpg(POSTGRES_URL)
    woken = wakeup.waiter()
    heard: list[WebhookChange | None] = []
    webhook_changes.listen(heard.append)
    stop = asyncio.Event()
    listener = asyncio.create_task(listen_for_notifications(through_proxy, stop, probe_every=0.3))

    async def woken_by_a_notification() -> None:
        woken.clear()
        await notifier.execute(f"SELECT pg_notify('{NOTIFY_CHANNEL}', '')")
        await asyncio.wait_for(woken.wait(), timeout=2)

    try:
        await asyncio.wait_for(woken.wait(), timeout=5)  # listening: it announces itself
        await woken_by_a_notification()
        assert heard == []

        proxy.silence()
        silenced = proxy.connections
        woken.clear()
        # The probe goes unanswered; the listener connects again and wakes the worker, which
        # polls for whatever was committed meanwhile.
        await asyncio.wait_for(woken.wait(), timeout=5)
        assert proxy.connections > silenced
        # Webhook changes made while it was deaf went unheard: workers are told so (None), as
        # soon as the probe finds the connection silent and again once it is back.
        assert heard == [None, None]
        await woken_by_a_notification()  # through the new connection
    finally:
        stop.set()
        await asyncio.wait_for(listener, timeout=5)
        wakeup.forget(woken)
        webhook_changes.forget(heard.append)
        await notifier.close()
        await proxy.stop()


async def test_a_listener_whose_connection_the_server_ended_says_so_at_once() -> None:
    # An administrator or a restart ends the listening connection: workers hear at once that
    # changes may go unheard (None), not at the next probe, seconds later, while they go on
    # sending what they hold for webhooks that may be deleted meanwhile.
    admin = await connect_asyncpg(POSTGRES_URL)
    woken = wakeup.waiter()
    heard: list[tuple[float, WebhookChange | None]] = []

    def hear(change: WebhookChange | None) -> None:
        heard.append((time.monotonic(), change))

    webhook_changes.listen(hear)
    stop = asyncio.Event()
    listener = asyncio.create_task(listen_for_notifications(POSTGRES_URL, stop, probe_every=30))
    try:
        await asyncio.wait_for(woken.wait(), timeout=5)  # listening
        ended = time.monotonic()
        assert await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND query LIKE 'LISTEN%'"
        )
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.02)
        assert heard and heard[0][1] is None and heard[0][0] - ended < 1.5, heard
    finally:
        stop.set()
        await asyncio.wait_for(listener, timeout=5)
        wakeup.forget(woken)
        webhook_changes.forget(hear)
        await admin.close()
