"""Headers every answer under a path carries, those the edge or the framework make too (a 405,
a 413, a query the edge refuses): how the checkout and the portal keep their pages from being
framed, sniffed or sent on with a Referer, whatever answers."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadersUnder:
    """Adds `headers` to every answer whose path starts with `prefix`; headers an answer sets
    itself are kept."""

    def __init__(self, app: ASGIApp, *, prefix: str, headers: Mapping[str, str]) -> None:
        self.app = app
        self.prefix = prefix
        self.headers = [(name.lower().encode(), value.encode()) for name, value in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                added = [(n, v) for n, v in self.headers if n not in present]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
