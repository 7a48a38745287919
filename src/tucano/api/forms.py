"""HTML forms as they arrive (the checkout's and the portal's): read as
`application/x-www-form-urlencoded`, known fields only, each once. Nothing of a form is logged or
repeated."""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import parse_qsl

from fastapi import Request

from tucano.core.errors import AppError, BadRequest, ErrorCode

FORM_TYPE = "application/x-www-form-urlencoded"
MOST_FIELDS = 32
LONGEST_VALUE = 200


async def read_form(
    request: Request, fields: Collection[str], *, longest_value: int = LONGEST_VALUE
) -> dict[str, str]:
    """The form's fields among `fields`; 415 for another content type, 400 for a field given
    twice, holding NUL or longer than `longest_value`."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != FORM_TYPE:
        raise AppError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE, errors=[f"the form must be sent as {FORM_TYPE}"]
        )
    try:
        pairs = parse_qsl(
            (await request.body()).decode("utf-8"),
            keep_blank_values=True,
            max_num_fields=MOST_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise BadRequest(f"the form must be UTF-8 text of at most {MOST_FIELDS} fields") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name not in fields:
            continue  # named in no answer: a field's name may be anything, a card number too
        if name in form:
            raise BadRequest(f"{name} is given more than once")
        if "\x00" in value or len(value) > longest_value:
            raise BadRequest(f"{name} is not valid")
        form[name] = value
    return form
