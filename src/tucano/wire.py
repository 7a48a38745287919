"""JSON on the wire, both ways, without a binary float anywhere.

In: request bodies are parsed with numbers with a fraction as `Decimal` (and NaN/Infinity
refused), through `DecimalJSONRoute`. Out: `json_response` renders with orjson, writing a `Decimal`
as a JSON number exactly as the Decimal reads (`10.50` stays `10.50`) and a datetime as
`2026-01-15T10:30:00.000Z`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Coroutine
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any

import orjson
from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer
from pydantic.alias_generators import to_camel
from starlette.responses import Response

from tucano.clock import end_of_day, format_utc, start_of_day, to_millis


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _refuse_nul(value: Any) -> None:
    # PostgreSQL text cannot hold U+0000, and no field of this API has a use for it.
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("a JSON string contains the NUL character (\\u0000)")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_nul(key)
            _refuse_nul(item)
    elif isinstance(value, list):
        for item in value:
            _refuse_nul(item)


def loads(body: bytes | str) -> Any:
    """Parse JSON with fractional numbers as Decimal; refuse NaN, Infinity and NUL characters."""
    document = json.loads(body, parse_float=Decimal, parse_constant=_refuse_constant)
    _refuse_nul(document)
    return document


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise TypeError("non-finite decimal")
        return orjson.Fragment(format(value, "f").encode())
    if isinstance(value, datetime):
        return format_utc(value)
    if isinstance(value, uuid.UUID):  # subclasses too, such as asyncpg's UUID
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python", by_alias=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_default, option=orjson.OPT_PASSTHROUGH_DATETIME)


class JSONBody(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def json_response(
    content: Any, *, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    if isinstance(content, BaseModel):
        content = content.model_dump(mode="python", by_alias=True)
    return JSONBody(content, status_code=status_code, headers=headers)


class _DecimalRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = loads(await self.body())
            except ValueError as exc:
                if isinstance(exc, json.JSONDecodeError):
                    raise
                # NaN / Infinity: report as malformed JSON like any other bad document.
                raise json.JSONDecodeError(str(exc), "", 0) from exc
        return self._json


class DecimalJSONRoute(APIRoute):
    """An APIRoute whose request bodies keep their decimals (see module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def decimal_handler(request: Request) -> Response:
            return await handler(_DecimalRequest(request.scope, request.receive))

        return decimal_handler


# A datetime that leaves as ISO 8601 UTC with milliseconds, in JSON and in Python dumps alike.
UtcTimestamp = Annotated[datetime, PlainSerializer(format_utc, return_type=str)]


class ApiModel(BaseModel):
    """Base of every request and response body: snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


def _timestamp_parser(*, end_of_range: bool) -> Any:
    def parse(value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if len(text) == 10:  # a bare date: the whole day, inclusive
                try:
                    day = date.fromisoformat(text)
                except ValueError:
                    raise ValueError(
                        "must be an ISO 8601 timestamp such as 2026-01-15T10:30:00.000Z"
                    ) from None
                return end_of_day(day) if end_of_range else start_of_day(day)
            try:
                moment = datetime.fromisoformat(text.replace("z", "Z"))
            except ValueError:
                raise ValueError(
                    "must be an ISO 8601 timestamp such as 2026-01-15T10:30:00.000Z"
                ) from None
            # No offset given: the interface is UTC throughout, so read it as UTC.
            return to_millis(moment)
        return value

    return parse


# Query parameters that bound a time range: ISO 8601 with or without offset (UTC assumed), or a
# bare date meaning the start (or, for the end of a range, the last millisecond) of that day.
RangeStart = Annotated[datetime, BeforeValidator(_timestamp_parser(end_of_range=False))]
RangeEnd = Annotated[datetime, BeforeValidator(_timestamp_parser(end_of_range=True))]
