"""Webhook receivers for the benchmarks: one process, several ports, answering 200 at once and
remembering when each delivery arrived. `GET /_arrivals` hands the record over (and clears it).

    python -m bench.receivers 4      # prints the ports, one line of JSON, then serves
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import web

arrivals: list[tuple[str, float]] = []


async def receive(request: web.Request) -> web.Response:
    await request.read()
    arrivals.append((request.headers.get("webhook-id", ""), time.time()))
    return web.Response(text="ok")


async def hand_over(_request: web.Request) -> web.Response:
    taken = list(arrivals)
    arrivals.clear()
    return web.json_response(taken)


async def serve(count: int) -> None:
    app = web.Application()
    app.router.add_post("/{tail:.*}", receive)
    app.router.add_get("/_arrivals", hand_over)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ports = []
    for _ in range(count):
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    print(json.dumps(ports), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
