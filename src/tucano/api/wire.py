"""What the wire is made of: `ApiModel` (camelCase), timestamps in and out, canonical UUIDs,
whole numbers, time ranges, and JSON responses rendered by `core.json_codec`.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from starlette.responses import Response

from tucano.core.clock import end_of_day, format_utc, start_of_day, to_millis
from tucano.core.json_codec import dumps


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


# Why a body that Python's parser gives up on (arrays or objects within each other past its
# recursion limit) is refused; errors.py names it in the error body.
def digits_only(value: Any) -> Any:
    """A BeforeValidator: an integer written as text must be plain digits."""
    if isinstance(value, str):
        if not _DIGITS.fullmatch(value):
            raise ValueError("must be an integer written in plain digits (0-9)")
        if len(value) > _BEYOND_ANY_BOUND:
            # Python refuses to parse over 4300 digits: keep what matters for the range check,
            # the sign and the magnitude (a number beyond any bound stands in for a huge one).
            sign = "-" if value.startswith("-") else ""
            magnitude = value.lstrip("-").lstrip("0") or "0"
            if len(magnitude) > _BEYOND_ANY_BOUND:
                magnitude = "1" + "0" * _BEYOND_ANY_BOUND
            return sign + magnitude
    return value


_DIGITS = re.compile(r"-?[0-9]+")
_BEYOND_ANY_BOUND = 40

# An integer in a path or query string, written in plain digits (a minus allowed, for the range
# check to name): not 1_0, +1, " 1" or 5.0, which the lax parsing of integers would otherwise take.
WholeNumber = Annotated[int, BeforeValidator(digits_only)]


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def parse_uuid(text: str) -> uuid.UUID:
    """A UUID in its one canonical spelling (8-4-4-4-12 hex digits); ValueError otherwise.
    Python's own parser also takes braces, `urn:uuid:` and no dashes, spellings a client would
    then not see echoed back as it sent them."""
    if not _UUID.fullmatch(text):
        raise ValueError("must be a UUID such as 4f3c9b4e-8f5a-4c1e-9a53-2f1d2b6c7e10")
    return uuid.UUID(text)


def _canonical_uuid(value: Any) -> Any:
    return parse_uuid(value) if isinstance(value, str) else value


CanonicalUUID = Annotated[uuid.UUID, BeforeValidator(_canonical_uuid)]


# A datetime that leaves as ISO 8601 UTC with milliseconds, in JSON and in Python dumps alike.
UtcTimestamp = Annotated[
    datetime,
    PlainSerializer(format_utc, return_type=str),
    WithJsonSchema(
        {"type": "string", "format": "date-time", "example": "2026-01-15T10:30:00.000Z"}
    ),
]


def in_utc(moment: datetime) -> datetime:
    """An instant given with any offset, in UTC to the millisecond; a ValueError (a 400 naming
    the field) when UTC cannot hold it, as 0001-01-01T00:00:00+01:00 cannot."""
    try:
        return to_millis(moment)
    except OverflowError:
        raise ValueError("is out of range once converted to UTC") from None


_ISO_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]")


def _iso_text(value: Any) -> Any:
    # Lax datetimes would also read a number, or digits in a string, as Unix seconds.
    if isinstance(value, datetime):  # made in Python (samples, features publishing events)
        return value
    if not isinstance(value, str) or not _ISO_DATE_TIME.match(value):
        raise ValueError("must be an ISO 8601 date and time, such as 2026-01-15T10:30:00.000Z")
    return value


# A timestamp as received: ISO 8601 text with an offset, kept in UTC, given back like
# UtcTimestamp.
ReceivedTimestamp = Annotated[
    AwareDatetime,
    BeforeValidator(_iso_text),
    AfterValidator(in_utc),
    PlainSerializer(format_utc, return_type=str),
]


class ApiModel(BaseModel):
    """Base of every request and response body: snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


_FRACTION = re.compile(r"[Tt ][0-9:]+[.,]([0-9]+)")


def _finer_than_milliseconds(text: str) -> bool:
    """Whether an ISO 8601 timestamp gives a nonzero digit past the milliseconds (read from
    the text: datetime keeps six digits and drops the rest)."""
    fraction = _FRACTION.search(text)
    return fraction is not None and fraction.group(1)[3:].strip("0") != ""


_OFFSET_WITH_SECONDS = re.compile(r"[Tt ].*[+-]\d\d:?\d\d:?\d\d([.,]\d*)?$")
# A fraction of an hour or of a minute (ISO 8601's 10.5 is 10:30), which Python reads as a
# fraction of a second (10:00:00.5): refused rather than read wrongly.
_FRACTION_WITHOUT_SECONDS = re.compile(r"[Tt ]\d\d(?::?\d\d)?[.,]")


# A leap second (RFC 3339 allows 23:59:60), which datetime cannot hold: it comes after the last
# millisecond of its minute's 59th second and before the next minute, so as a bound it reads as
# the end of that second (a start then counts from the next millisecond, as any finer start does).
_LEAP_SECOND = re.compile(r"(?<=[Tt ]\d\d:\d\d:)60(?:[.,]\d+)?")


def _timestamp_parser(*, end_of_range: bool) -> Any:
    def parse(value: Any) -> Any:
        if isinstance(value, str):
            text = _LEAP_SECOND.sub("59.9999999", value.strip(), count=1)
            if not re.search(r"[Tt ]", text):  # a date alone, in any ISO 8601 form: the whole day
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
            if _FRACTION_WITHOUT_SECONDS.search(text):
                raise ValueError(
                    "must give seconds before a fraction, such as 2026-01-15T10:30:00.500Z"
                )
            if _OFFSET_WITH_SECONDS.search(text):
                # Python reads "+00:00:00.000001" (and drops its fraction); ISO 8601 offsets are
                # hours and minutes.
                raise ValueError("must have an offset in hours and minutes, such as -03:00")
            # No offset given: the interface is UTC throughout, so read it as UTC.
            bound = in_utc(moment)  # cut down to the millisecond, as stored times are
            if not end_of_range and _finer_than_milliseconds(text):
                # A start between two milliseconds leaves out the one before it.
                try:
                    bound += timedelta(milliseconds=1)
                except OverflowError:
                    raise ValueError("is out of range once converted to UTC") from None
            return bound
        return value

    return parse


def range_is_reversed(
    start: datetime, end: datetime, *, start_as_sent: str | None, end_as_sent: str | None
) -> bool:
    """Whether a time range's start (RangeStart) comes after its end (RangeEnd), as sent. A
    start finer than the millisecond was moved up to the next one, and an end cut down to its
    own: of two bounds in one millisecond, the times as sent decide (the range is empty either
    way, but one reversed is an error)."""
    if start <= end:
        return False
    if start - end > timedelta(milliseconds=1) or not start_as_sent or not end_as_sent:
        return True
    first = _instant_as_sent(start_as_sent, end_of_range=False)
    last = _instant_as_sent(end_as_sent, end_of_range=True)
    return first is None or last is None or first > last


# Past the sixth digit of a second's fraction, compared as text: digits sort as the fractions
# they write do, and these sort after any of them.
_LEAP = "A"  # a leap second: after every fraction of the second before it
_WHOLE_DAY = "B"  # a bare date as an end: after everything that day, leap second included


def _instant_as_sent(text: str, *, end_of_range: bool) -> tuple[datetime, str] | None:
    """A bound exactly as sent: the instant to the microsecond in UTC, and what comes after
    (the digits of its fraction past the sixth, which datetime drops; a leap second; a bare
    date's whole day). None if it cannot be read (the bound was refused anyway)."""
    text = text.strip()
    leap = _LEAP_SECOND.search(text)
    after = ""
    if leap:
        after = _LEAP + leap.group(0)[3:].rstrip("0")
        text = text[: leap.start()] + "59.999999" + text[leap.end() :]
    try:
        if not re.search(r"[Tt ]", text):
            day = date.fromisoformat(text)
            if end_of_range:
                return datetime.combine(day, time.max, tzinfo=UTC), _WHOLE_DAY
            return datetime.combine(day, time.min, tzinfo=UTC), ""
        moment = datetime.fromisoformat(text.replace("z", "Z"))
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    if not leap and (fraction := _FRACTION.search(text)):
        after = fraction.group(1)[6:].rstrip("0")
    return moment, after


# Query parameters that bound a time range: ISO 8601 with or without offset (UTC assumed), or a
# bare date meaning the start (or, for the end of a range, the last millisecond) of that day.
# Declared as either form in the OpenAPI document, so a client checking against it sends both.
_RANGE_SCHEMA = WithJsonSchema(
    {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "format": "date"}]}
)
RangeStart = Annotated[
    datetime, BeforeValidator(_timestamp_parser(end_of_range=False)), _RANGE_SCHEMA
]
RangeEnd = Annotated[datetime, BeforeValidator(_timestamp_parser(end_of_range=True)), _RANGE_SCHEMA]
