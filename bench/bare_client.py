"""The ceiling as a process of its own: a bare aiohttp client posting signed PIX_OUTBOUND bodies
to receivers, as many at once as a worker sends, nothing read or written in a database.

    python -m bench.bare_client URL,URL,... EVENTS

It signs its bodies first, prints `ready`, waits for a line on stdin, posts EVENTS bodies to
every URL, and prints one line of JSON: {"started", "finished"} (time.time()) and "deliveries".
Several of them started together stand beside as many `tucano worker` processes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time

import aiohttp

from bench.deliveries import CONCURRENCY, payloads, run
from tucano.core import json_codec
from tucano.webhooks.service import new_signing_secret
from tucano.webhooks.signing import delivery_headers


async def post_all(urls: list[str], events: int) -> None:
    secret = new_signing_secret()
    jobs: list[tuple[str, bytes, dict[str, str]]] = []
    for payload in payloads(events):
        body = json_codec.dumps(payload)
        headers = delivery_headers(
            secrets=[secret],
            message_id="evt_" + secrets.token_hex(16),
            timestamp=int(time.time()),
            body=body,
            event_type="PIX_OUTBOUND",
            user_agent="bench",
        )
        jobs += [(url, body, headers) for url in urls]
    queue: asyncio.Queue[tuple[str, bytes, dict[str, str]]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as http:

        async def sender() -> None:
            while not queue.empty():
                url, body, headers = queue.get_nowait()
                async with http.post(url, data=body, headers=headers) as response:
                    await response.read()

        started = time.time()
        await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        finished = time.time()
    print(json.dumps({"started": started, "finished": finished, "deliveries": len(jobs)}))


if __name__ == "__main__":
    run(lambda: post_all(sys.argv[1].split(","), int(sys.argv[2])))
