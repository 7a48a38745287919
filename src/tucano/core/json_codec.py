"""JSON both ways without a binary float: numbers with a fraction parse as `Decimal` (NaN and
Infinity refused), and render with orjson, a `Decimal` written exactly as it reads (`10.50`
stays `10.50`) and a datetime as `2026-01-15T10:30:00.000Z`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from pydantic import (
    BaseModel,
)

from tucano.core.card_numbers import redact_card_numbers
from tucano.core.clock import format_utc


class RefusedContent(ValueError):
    """A JSON document that parses but holds what no field may (a repeated key, a NUL): the
    API answers it as an invalid parameter naming the field, not as malformed JSON."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _nul_at(value: Any, path: list[str | int] | None = None) -> str | None:
    """Where the first NUL character is (a field path such as `payload.receiver.name`), if any.
    The path (keys, and indexes of lists) is one list, extended and shortened as the walk goes,
    and written out only when a NUL is found: built for every element, it cost time in the
    depth and the keys' length."""
    path = [] if path is None else path
    if isinstance(value, str):
        return written_path(path) if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            path.append(key)
            if "\x00" in key:
                return written_path(path)
            found = _nul_at(item, path)
            if found is not None:
                return found
            path.pop()
    elif isinstance(value, list):
        for index, item in enumerate(value):
            path.append(index)
            found = _nul_at(item, path)
            if found is not None:
                return found
            path.pop()
    return None


def written_path(path: Sequence[str | int]) -> str:
    """`payload.receiver.name`, `items[2].x`: keys as an answer may show them (card_numbers)."""
    written = ""
    for part in path:
        if isinstance(part, int):
            written += f"[{part}]"
        else:
            written += f".{redact_card_numbers(part)}" if written else redact_card_numbers(part)
    return written


def _parse_int(text: str) -> int | Decimal:
    # Python refuses to turn more than 4300 digits into an int; a Decimal lets the field's own
    # rule (a maximum, or an integer type) refuse it by name.
    return int(text) if len(text) <= 4000 else Decimal(text)


def _object_without_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # {"amount": 1, "amount": 1000} means what the parser reading it decides; refused rather
    # than silently keeping the last, as another parser on the way might have kept the first.
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RefusedContent(
                    f"{redact_card_numbers(key)} is given more than once in one object"
                )
            seen.add(key)
    return document


def loads(body: bytes | str) -> Any:
    """Parse JSON with fractional numbers as Decimal; refuse NaN and Infinity (as malformed),
    a key repeated in one object, and NUL characters (PostgreSQL text cannot hold U+0000, and
    no field has a use for it)."""
    document = json.loads(
        body,
        parse_float=Decimal,
        parse_int=_parse_int,
        parse_constant=_refuse_constant,
        object_pairs_hook=_object_without_repeated_keys,
    )
    where = _nul_at(document)
    if where is not None:
        raise RefusedContent(f"{where or 'body'} must not contain the NUL character (\\u0000)")
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


def dumps(value: Any, *, sort_keys: bool = False, indent: bool = False) -> bytes:
    """`value` as JSON; with `indent`, two spaces per level, for people to read."""
    option = orjson.OPT_PASSTHROUGH_DATETIME | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    option |= orjson.OPT_INDENT_2 if indent else 0
    return orjson.dumps(value, default=_default, option=option)
