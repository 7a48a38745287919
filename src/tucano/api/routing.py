"""The route class of the JSON API: its checks that need no body run before the body is read,
and its request bodies keep their decimals (parsed by `core.json_codec`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any, Protocol, TypeGuard, runtime_checkable

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response

from tucano.core.json_codec import RefusedContent, loads


class InvalidBodyField(HTTPException):
    """A JSON body that parses but holds what no field may: answered as an invalid parameter
    (400, errorCode 36) naming the field, not as malformed JSON."""

    def __init__(self, problem: str) -> None:
        super().__init__(400, problem)


NESTED_TOO_DEEPLY = "nested too deeply"


class _DecimalRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = loads(await self.body())
            except RefusedContent as exc:
                raise InvalidBodyField(str(exc)) from None
            except RecursionError:
                raise json.JSONDecodeError(NESTED_TOO_DEEPLY, "", 0) from None
            except ValueError as exc:
                if isinstance(exc, json.JSONDecodeError):
                    raise
                # NaN / Infinity: report as malformed JSON like any other bad document.
                raise json.JSONDecodeError(str(exc), "", 0) from exc
            if isinstance(self._json, Decimal):
                # A body that is a bare fraction (1.5): validation would read a Decimal as an
                # object with attributes (none of the fields) instead of refusing it as it
                # refuses 1 or "x". Handed over as the number it is, it is refused the same way.
                self._json = float(self._json)
        return self._json


@runtime_checkable
class CheckedBeforeBody(Protocol):
    """A dependency that can decide from the request's head alone (a bearer token, a scope):
    FastAPI reads a body before it resolves dependencies, so a caller without credentials would
    otherwise hold a connection for as long as it takes to send (or stall) a body."""

    async def before_body(self, request: Request) -> None: ...


def is_checked_before_body(call: object) -> TypeGuard[CheckedBeforeBody]:
    return isinstance(call, CheckedBeforeBody)


class DecimalJSONRoute(APIRoute):
    """An APIRoute whose checks that need no body come first and whose request bodies keep
    their decimals (see module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        calls = (dependency.call for dependency in self.dependant.dependencies)
        checks = [call for call in calls if is_checked_before_body(call)]

        async def decimal_handler(request: Request) -> Response:
            for check in checks:
                await check.before_body(request)
            return await handler(_DecimalRequest(request.scope, request.receive))

        return decimal_handler
