"""Tucano as an operator runs it, for the benchmarks that need whole processes: `tucano serve`
and `tucano worker` on a fresh database, receivers with a webhook each, access tokens for a
merchant and for a publisher of events, and the resident memory and open connections of each
process."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.deliveries import pix_outbound
from tests.support.processes import ServeProcess, clean_env, start_serve, start_worker

from bench.served import access_token
from tucano.core import json_codec

CUSTOMER_ID = 4242
# TCP states (/proc/net/tcp) of a connection still open on the client's side: established, or
# closed by the other end only.
OPEN_STATES = ("01", "08")


def resident_kib(pid: int) -> int | None:
    """VmRSS of a process, in KiB, from /proc (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds open (none once it is gone)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        pass
    return inodes


def open_connections(pids: list[int], ports: set[int]) -> Counter[int]:
    """How many TCP connections (IPv4) to any of `ports` each of `pids` holds open, by pid."""
    owner = {inode: pid for pid in pids for inode in socket_inodes(pid)}
    held: Counter[int] = Counter()
    with open("/proc/net/tcp") as table:
        next(table)  # the header
        for line in table:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port in ports and fields[3] in OPEN_STATES and fields[9] in owner:
                held[owner[fields[9]]] += 1
    return held


def event_body() -> bytes:
    """A PIX_OUTBOUND publication, as the provider's systems send it."""
    return json_codec.dumps(
        {"eventType": "PIX_OUTBOUND", "customerId": CUSTOMER_ID, "payload": pix_outbound()}
    )


@dataclass
class Deployment:
    workdir: Path
    env: dict[str, str]
    database_url: str
    servers: list[ServeProcess]
    merchant_token: str = ""
    publisher_token: str = ""
    workers: list[ServeProcess] = field(default_factory=list)

    def headers(self, token: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token}",
            "content-type": "application/json",
            "x-transaction-id": str(uuid.uuid4()),
        }

    def start_workers(self, count: int) -> None:
        self.workers += [start_worker(self.workdir, self.env, f"worker{i}") for i in range(count)]

    def stop_workers(self) -> None:
        """SIGTERM, as a service manager stops them; each must exit 0."""
        codes = [worker.stop() for worker in self.workers]
        self.workers = []
        if any(codes):
            raise RuntimeError(f"a worker exited with {codes}")

    async def register(self, http: aiohttp.ClientSession, target_urls: list[str]) -> None:
        """One PIX_OUTBOUND webhook per target."""
        for url in target_urls:
            async with http.post(
                self.servers[0].base_url + "/webhook/v1/create",
                data=json.dumps({"targetUrl": url, "eventType": "PIX_OUTBOUND"}),
                headers=self.headers(self.merchant_token),
            ) as response:
                if response.status != 200:
                    raise RuntimeError(f"webhook not created: {await response.text()}")


@asynccontextmanager
async def deployed(
    pg_url: str | None, *, servers: int, with_worker: bool, **settings: str
) -> AsyncIterator[Deployment]:
    """`servers` `tucano serve` processes (each with its own worker if `with_worker`, else
    `--no-worker`) on a fresh database: a scratch PostgreSQL database beside `pg_url`, or a
    temporary SQLite file when `pg_url` is None. Workers are started by the caller."""
    workdir = Path(tempfile.mkdtemp(prefix="tucano_bench_"))
    database_url = (
        await create_scratch_database(pg_url, prefix="tucano_bench")
        if pg_url
        else f"sqlite+aiosqlite:///{workdir / 'tucano.db'}"
    )
    env = clean_env(
        TUCANO_DATABASE_URL=database_url,
        TUCANO_SECRET_KEY=secrets.token_urlsafe(48),
        TUCANO_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        TUCANO_LOG_LEVEL="WARNING",
        # The benchmarks measure the service, not its per-client rate limit.
        TUCANO_RATE_LIMIT="1000000/second",
        **{f"TUCANO_{name.upper()}": value for name, value in settings.items()},
    )
    extra = () if with_worker else ("--no-worker",)
    started: list[ServeProcess] = []
    deployment = Deployment(workdir, env, database_url, started)
    try:
        # The first migrates; the others find the schema at head.
        started.append(await asyncio.to_thread(start_serve, workdir, env, *extra))
        for _ in range(servers - 1):
            started.append(
                await asyncio.to_thread(start_serve, workdir, env, "--no-migrate", *extra)
            )
        base_url = started[0].base_url
        deployment.merchant_token = await access_token(base_url, workdir, env, CUSTOMER_ID)
        deployment.publisher_token = await access_token(
            base_url, workdir, env, CUSTOMER_ID, "events.publish"
        )
        yield deployment
    finally:
        for worker in deployment.workers:
            worker.stop()
        for server in started:
            server.stop()
        if pg_url:
            await drop_scratch_database(pg_url, database_url)
