"""The outermost layer of every HTTP request (pure ASGI, before routing).

It gives the request its transaction id (the client's `x-transaction-id`, or a new UUID), echoes it
on the response, refuses bodies over the limit (413), turns any escaped exception into the one
error body (500, never a stack trace), writes the one log line of the request and counts it in
the HTTP metrics (core.metrics), by the template of the route it matched.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any

import structlog
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tucano.api.dependencies import first_unsupported_coding, foreign_charset
from tucano.api.errors import (
    OAUTH_PREFIX,
    answers_the_oauth_way,
    error_response,
    oauth_error_response,
)
from tucano.core.errors import ErrorCode
from tucano.core.logs import client_gone, exception_summary
from tucano.core.metrics import UNMATCHED_ROUTE, record_request
from tucano.db.outages import is_database_unavailable

log = structlog.get_logger("tucano.request")

# Echoed as sent when it is printable ASCII of reasonable length (the JSON logs escape what
# needs escaping); control or non-ASCII characters could not be sent back in a header as they
# came, so such a value is replaced, as is one longer than any id needs to be.
_SAFE_TRANSACTION_ID = re.compile(r"^[\x20-\x7e]{1,256}$")
# Request headers beyond this, all names and values together, are a 431: no request of this
# API needs more than a few hundred bytes of them, and each is parsed, matched and logged.
# (uvicorn has read them by then: a proxy in front bounds what is read at all.)
MAX_REQUEST_HEADER_BYTES = 32 * 1024


class _ClientGone(Exception):
    """The server could not write the answer: the client closed the connection (it may have
    pipelined requests and left before their answers). Not a fault of Tucano's."""


def _client_gone(exc: BaseException) -> BaseException | None:
    """The sign behind `exc`, if any, that the client left: an answer it could not be sent, or
    a body it stopped sending (a streamed answer's task group may wrap either)."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, _ClientGone | ClientDisconnect):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending += current.exceptions
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return None


class _BodyTooLarge(HTTPException):
    """Raised while the body is read, so the framework answers it like any 413 (errors.py)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body must be at most {limit} bytes")


def _without_trailing_slash(scope: Scope) -> Scope:
    """`scope` with a trailing slash on its path read as clients that add one by accident mean
    it: `/payment-link/v1/` is `/payment-link/v1`. (A query parameter with an empty value stays
    a value, and an invalid one for most parameters, as the OpenAPI document says.)"""
    path: str = scope["path"]
    trimmed = path.rstrip("/") or "/"
    if trimmed == path:
        return scope
    changed = {**scope, "path": trimmed}
    raw_path = scope.get("raw_path")
    if isinstance(raw_path, bytes):
        changed["raw_path"] = raw_path.rstrip(b"/") or b"/"
    return changed


class _BodyTooSlow(HTTPException):
    """Raised while the body is read, once its time is up (answered 408, like _BodyTooLarge)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            408,
            f"the request body must arrive within {seconds:g} seconds of the request",
            headers={"Connection": "close"},  # the rest of it must not be read as a request
        )


class EdgeMiddleware:
    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, body_timeout_seconds: float = 10.0
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_seconds = body_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_at = time.perf_counter()
        headers: dict[str, str] = {}
        header_bytes = 0
        content_encodings: list[str] = []
        for key, value in scope["headers"]:
            header_bytes += len(key) + len(value) + 4
            name = key.decode("latin-1").lower()
            if name == "content-encoding":
                content_encodings.append(value.decode("latin-1"))
            # The first of a repeated header, as the operations read it (Starlette's get()).
            headers.setdefault(name, value.decode("latin-1"))
        offered = headers.get("x-transaction-id", "").strip()
        transaction_id = offered if _SAFE_TRANSACTION_ID.match(offered) else str(uuid.uuid4())
        state: dict[str, Any] = scope.setdefault("state", {})
        state["transaction_id"] = transaction_id
        response: dict[str, Any] = {"status": 500, "started": False}
        structlog.contextvars.bind_contextvars(transactionId=transaction_id)
        sent_path = scope["path"]  # logged as the client sent it
        scope = _without_trailing_slash(scope)
        method = scope["method"]
        if method == "HEAD":
            # HEAD is GET without the body (RFC 9110 9.3.2), for every operation that has a GET.
            scope = {**scope, "method": "GET"}

        async def send_with_id(message: Message) -> None:
            if method == "HEAD" and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            if message["type"] == "http.response.start":
                response["status"] = message["status"]
                response["started"] = True
                kept = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() != b"x-transaction-id"
                ]
                if not any(k.lower() == b"cache-control" for k, _ in kept):
                    # Answers carry secrets (a webhook's signing secret, a link's checkout
                    # token) and customers' data: no cache, shared or private, keeps one.
                    kept.append((b"cache-control", b"no-store"))
                if has_body and not body_asked_for:
                    # Answered from its head alone (a 401, a refusal): a body it never asked
                    # for must not hold the connection. (Once asked for, uvicorn drops the rest.)
                    kept = [(k, v) for k, v in kept if k.lower() != b"connection"]
                    kept.append((b"connection", b"close"))
                if not any(k.lower() == b"x-content-type-options" for k, _ in kept):
                    # A browser must take an answer for the type it says (JSON, CSV), never
                    # sniff it into HTML or a script.
                    kept.append((b"x-content-type-options", b"nosniff"))
                message["headers"] = [*kept, (b"x-transaction-id", transaction_id.encode())]
            try:
                await send(message)
            except Exception as exc:
                raise _ClientGone from exc

        declared = headers.get("content-length")
        has_body = (declared not in (None, "0")) or "transfer-encoding" in headers
        received = 0
        body_asked_for = False
        body_deadline = asyncio.get_running_loop().time() + self.body_timeout_seconds
        body_complete = False

        async def receive_limited() -> Message:
            nonlocal received, body_complete, body_asked_for
            body_asked_for = True
            if body_complete:
                # Only a disconnect can come now, which a streamed answer waits for: no deadline.
                return await receive()
            try:
                async with asyncio.timeout_at(body_deadline):
                    message = await receive()
            except TimeoutError:
                raise _BodyTooSlow(self.body_timeout_seconds) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
                body_complete = not message.get("more_body", False)
            return message

        async def answer(
            code: ErrorCode, *errors: str, headers: dict[str, str] | None = None
        ) -> None:
            if answers_the_oauth_way(scope["path"], code.status):
                response: Response = oauth_error_response(
                    code.status, (*errors, code.message)[0], headers=headers
                )
            else:
                response = error_response(code, transaction_id, errors=errors, headers=headers)
            await response(scope, receive, send_with_id)

        try:
            coding = first_unsupported_coding(content_encodings) if has_body else None
            charset = foreign_charset(headers.get("content-type", "")) if has_body else None
            if header_bytes > MAX_REQUEST_HEADER_BYTES:
                await answer(
                    ErrorCode.HEADERS_TOO_LARGE,
                    f"the request headers must be at most {MAX_REQUEST_HEADER_BYTES} bytes",
                )
            elif coding is not None and not scope["path"].startswith(OAUTH_PREFIX):
                # Before the body is read at all: read as it is, a compressed body would be
                # reported as malformed JSON, which it is not.
                await answer(
                    ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                    f"Content-Encoding {coding} is not supported: send the body as is",
                )
            elif charset is not None and not scope["path"].startswith(OAUTH_PREFIX):
                await answer(
                    ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                    f"a body must be in UTF-8, not {charset}",
                )
            elif b"%00" in scope.get("query_string", b""):
                await answer(
                    ErrorCode.INVALID_PARAMETERS, "query parameters must not contain NUL (%00)"
                )
            elif declared is not None and not declared.isdigit():
                await answer(ErrorCode.MALFORMED_BODY, "Content-Length must be a whole number")
            elif declared is not None and int(declared) > self.max_body_bytes:
                await answer(ErrorCode.PAYLOAD_TOO_LARGE, self._limit_text())
            else:
                await self.app(scope, receive_limited, send_with_id)
        except _BodyTooLarge:
            if not response["started"]:
                await answer(ErrorCode.PAYLOAD_TOO_LARGE, self._limit_text())
        except _BodyTooSlow as exc:
            if not response["started"]:
                await answer(
                    ErrorCode.REQUEST_TIMEOUT, str(exc.detail), headers=dict(exc.headers or {})
                )
        except Exception as exc:
            gone = _client_gone(exc)
            if gone is not None:
                response["client_gone"] = True
                client_gone.set(True)
                log.info("client_gone", error=exception_summary(gone.__cause__ or gone)[:300])
            elif is_database_unavailable(exc):
                # Not a fault of Tucano's: worth retrying, and one line in the log, not a trace.
                log.warning(
                    "database_unavailable",
                    method=scope["method"],
                    path=scope["path"],
                    error=exception_summary(exc)[:300],
                )
                if not response["started"]:
                    await answer(
                        ErrorCode.UNAVAILABLE,
                        "the database could not be used just now; retry",
                        headers={"Retry-After": "1"},
                    )
            else:
                log.exception("unhandled_error", method=scope["method"], path=scope["path"])
                if not response["started"]:
                    await answer(ErrorCode.UNEXPECTED)
        finally:
            seconds = time.perf_counter() - started_at
            gone = response.get("client_gone", False)
            log.info(
                "request",
                customerId=state.get("customer_id"),
                method=method,
                path=sent_path,
                status=response["status"],
                durationMs=round(seconds * 1000, 2),
                **({"clientGone": True} if gone else {}),
            )
            # The router leaves the route it matched in the scope it was given (Starlette).
            route = getattr(scope.get("route"), "path_format", None) or UNMATCHED_ROUTE
            # A client that left before any answer: nginx's 499, not a 500 of Tucano's.
            status = 499 if gone and not response["started"] else response["status"]
            record_request(method, route, status, seconds)
            structlog.contextvars.unbind_contextvars("transactionId")

    def _limit_text(self) -> str:
        return f"the request body must be at most {self.max_body_bytes} bytes"
