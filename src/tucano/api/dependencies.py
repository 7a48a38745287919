"""Request-level pieces every router shares: the JSON content check, x-transaction-id, and the
error responses documented on each operation."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from starlette.convertors import StringConvertor, register_url_convertor

from tucano.api.errors import ErrorBody
from tucano.api.wire import parse_uuid
from tucano.core.errors import AppError, BadRequest, ErrorCode

TRANSACTION_ID_HEADER = "x-transaction-id"


class _WebhookIdConvertor(StringConvertor):
    """`{id:webhook_id}`: a path segment that is not one of the fixed words of the webhook
    interface, so that `GET /webhook/v1/create` is a 405 rather than an id that is not a number."""

    regex = r"(?!(?:list|create|test-events)(?:/|$))[^/]+"


register_url_convertor("webhook_id", _WebhookIdConvertor())


def unsupported_content_encoding(request: Request) -> str | None:
    """The first content coding of the body other than identity, in every Content-Encoding
    header, if any. RFC 9110 8.4: a coding the server does not apply is refused (read as it is,
    the body would be taken for something it is not)."""
    return first_unsupported_coding(request.headers.getlist("content-encoding"))


def first_unsupported_coding(content_encodings: Iterable[str]) -> str | None:
    """unsupported_content_encoding, from the values of the Content-Encoding headers."""
    for header in content_encodings:
        for coding in header.split(","):
            coding = coding.strip().lower()
            if coding not in ("", "identity"):
                return coding[:40]
    return None


async def require_json_content(request: Request) -> None:
    """415 unless a request that carries a body says it is JSON."""
    has_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in (
        request.headers
    )
    if not has_body:
        return
    # (A Content-Encoding, or a charset other than UTF-8, the edge has refused already: before
    # the body is read.)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json" and not (
        content_type.startswith("application/") and content_type.endswith("+json")
    ):
        raise AppError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            errors=[f"Content-Type must be application/json, not {content_type or 'missing'}"],
        )


def foreign_charset(content_type: str) -> str | None:
    """The charset a Content-Type names, if it names one other than UTF-8. JSON is UTF-8
    (RFC 8259 8.1): a body said to be in another charset would be read as something it is
    not."""
    for parameter in content_type.lower().split(";")[1:]:
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"')
        # (ASCII is UTF-8 too.)
        if name.strip() == "charset" and charset not in ("utf-8", "utf8", "us-ascii", "ascii"):
            return charset[:40]
    return None


JsonContent = Annotated[None, Depends(require_json_content)]

# Query parameters an operation takes a list of; every other one is taken once.
REPEATABLE_QUERY_PARAMETERS = frozenset({"sort"})


def refuse_repeated_query_parameters(request: Request) -> None:
    """400 when a single-valued query parameter is given twice (`status=PAID&status=CREATED`):
    the framework would silently keep the last, and the caller, who may mean "either", would
    never know."""
    if b"&" not in request.scope.get("query_string", b""):
        return
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if not name:  # `?&=&=`: no parameter of any operation, so nothing to choose between
            continue
        if name in seen and name not in REPEATABLE_QUERY_PARAMETERS:
            raise BadRequest(f"query parameter {name[:100]} must be given at most once")
        seen.add(name)


# Dependencies here are `async def` on purpose: FastAPI runs a plain `def` dependency in a
# thread pool, which costs more than the work it does.
async def optional_transaction_id(
    x_transaction_id: Annotated[
        str | None,
        Header(
            alias=TRANSACTION_ID_HEADER,
            description="Optional client UUID, echoed in the response and in errors.",
        ),
    ] = None,
) -> str | None:
    return x_transaction_id


# Declared optional to the framework, so that a missing one gets our own error code (38) rather
# than a generic validation error; app._openapi marks it required in the document, by this text.
REQUIRED_TRANSACTION_ID_DESCRIPTION = "A new client-generated UUID per request (required)."


async def required_transaction_id(
    request: Request,
    x_transaction_id: Annotated[
        str | None,
        Header(
            alias=TRANSACTION_ID_HEADER,
            description=REQUIRED_TRANSACTION_ID_DESCRIPTION,
        ),
    ] = None,
) -> uuid.UUID:
    if x_transaction_id is None or not x_transaction_id.strip():
        raise BadRequest(
            "x-transaction-id header is required (a new UUID per request)",
            code=ErrorCode.INVALID_TRANSACTION_ID,
        )
    if len(request.headers.getlist(TRANSACTION_ID_HEADER)) > 1:
        # Two ids would make the idempotency key ambiguous: which one was meant?
        raise BadRequest(
            "x-transaction-id header must be sent once", code=ErrorCode.INVALID_TRANSACTION_ID
        )
    try:
        return parse_uuid(x_transaction_id.strip())
    except ValueError as exc:
        raise BadRequest(f"x-transaction-id {exc}", code=ErrorCode.INVALID_TRANSACTION_ID) from None


RequiredTransactionId = Annotated[uuid.UUID, Depends(required_transaction_id)]


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        400: "Invalid body, parameter or header.",
        401: "Missing, malformed, expired or forged access token.",
        403: "The token lacks the scope of this operation.",
        404: "Not found (also for another customer's resource).",
        409: "Conflict.",
        413: "Body larger than 1 MiB.",
        415: "Body is not application/json.",
        500: "Unexpected system error.",
        503: "The database cannot be used just now; retry after `Retry-After` seconds.",
    }
    return {
        status: {"model": ErrorBody, "description": descriptions.get(status, "Error.")}
        for status in (*statuses, 500)
    }


def preferred_media_type(accept: str, offered: Sequence[str]) -> str:
    """The one of `offered` (the first is the default) that an Accept header prefers, by
    quality (RFC 9110 12.5.1): the most specific matching range sets each type's quality, and a
    tie goes to the type the header names first. An empty or unmatched header gets the default."""
    ranges = []
    for position, part in enumerate(accept.lower().split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        if "/" not in media:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranges.append((media, quality, position))
    best, best_key = offered[0], (0.0, 0)
    for candidate in offered:
        kind = candidate.split("/")[0]
        matches = [
            (3 if media == candidate else 2 if media == f"{kind}/*" else 1, quality, position)
            for media, quality, position in ranges
            if media in (candidate, f"{kind}/*", "*/*")
        ]
        if not matches:
            continue
        _, quality, position = max(matches)
        if quality > 0 and (quality, -position) > best_key:
            best, best_key = candidate, (quality, -position)
    return best
