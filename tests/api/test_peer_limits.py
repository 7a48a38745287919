"""One address stalling many requests against `tucano serve`, and a client from another address
(decisions.md, "Requests that cannot be answered yet cost little")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import (
    ServeProcess,
    access_token,
    create_link_over,
    serve_with_a_client,
)

ATTACKER = "127.0.0.2"
HONEST = "127.0.0.3"
PER_PEER = 100


async def stall(port: int, path: str, headers: str) -> tuple[asyncio.StreamReader, Any]:
    """From the attacker's address: a POST whose body starts and never finishes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(ATTACKER, 0))
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
        "Content-Length: 5000\r\n\r\n".encode()
        + b'{"amount": '
    )
    await writer.drain()
    return reader, writer


async def status_within(reader: asyncio.StreamReader, seconds: float) -> int | None:
    """The status of the answer that arrives within `seconds`, or None."""
    with contextlib.suppress(TimeoutError, ConnectionError, ValueError, IndexError):
        async with asyncio.timeout(seconds):
            line = await reader.readline()
            return int(line.split()[1])
    return None


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            try:
                while await reader.read(65536):
                    pass
            except ConnectionError:
                pass
            return True
    return False


def resident_kib(server: ServeProcess) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


def honest_client_creates_a_link(base_url: str, client: dict[str, str]) -> httpx.Response:
    with httpx.Client(
        base_url=base_url, transport=httpx.HTTPTransport(local_address=HONEST), timeout=5
    ) as honest:
        return create_link_over(honest, access_token(honest, client))


def test_one_address_stalling_1200_bodies_keeps_no_other_address_out(tmp_path: Path) -> None:
    server, client = serve_with_a_client(tmp_path)
    port = int(server.base_url.rsplit(":", 1)[1])
    with httpx.Client(base_url=server.base_url) as http:
        token = access_token(http, client)

    async def attack() -> None:
        # 600 without credentials, 600 with a valid token: every one stalls its body.
        anonymous = await asyncio.gather(*(stall(port, "/payment-link/v1", "") for _ in range(600)))
        signed = await asyncio.gather(
            *(
                stall(port, "/payment-link/v1", f"Authorization: Bearer {token}\r\n")
                for _ in range(600)
            )
        )
        started = time.monotonic()
        statuses = await asyncio.gather(*(status_within(r, 5) for r, _ in anonymous))
        assert statuses == [401] * 600  # before their bodies: nothing to wait for
        answered = await asyncio.gather(*(status_within(r, 3) for r, _ in signed))
        # Past its share, the address is refused at once; the share waits for its bodies.
        assert answered.count(429) == 600 - PER_PEER, answered
        assert answered.count(None) == PER_PEER
        assert all(await asyncio.gather(*(closed_within(r, 2) for r, _ in anonymous)))
        # Meanwhile a client from another address is served as usual.
        created = await asyncio.to_thread(honest_client_creates_a_link, server.base_url, client)
        assert created.status_code == 200, created.text
        assert created.json()["status"]["description"] == "CREATED"
        # The share's bodies are cut at their deadline (10 s from each request), then closed.
        held = [r for (r, _), status in zip(signed, answered, strict=True) if status is None]
        late = await asyncio.gather(*(status_within(r, 15) for r in held))
        assert late == [408] * PER_PEER
        assert time.monotonic() - started < 20
        for _, writer in anonymous + signed:
            writer.close()

    try:
        before = resident_kib(server)
        asyncio.run(attack())
        # What the stalled requests held is bounded (measured: about +7 MiB for all 1,200).
        assert resident_kib(server) - before < 64 * 1024
        logs = server.wait_for_log("peer_limit_hit")
    finally:
        server.stop()
    line = next(json.loads(x) for x in logs.splitlines() if "peer_limit_hit" in x)
    assert line["level"] == "warning"
    assert line["peer"] == ATTACKER
    assert line["maxRequestsPerPeer"] == PER_PEER
    assert "Traceback" not in logs
