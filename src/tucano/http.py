"""Request-level pieces every router shares: the JSON content check, x-transaction-id, and the
error responses documented on each operation."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from starlette.convertors import StringConvertor, register_url_convertor

from tucano.errors import AppError, BadRequest, ErrorBody, ErrorCode

TRANSACTION_ID_HEADER = "x-transaction-id"


class _WebhookIdConvertor(StringConvertor):
    """`{id:webhook_id}`: a path segment that is not one of the fixed words of the webhook
    interface, so that `GET /webhook/v1/create` is a 405 rather than an id that is not a number."""

    regex = r"(?!(?:list|create|test-events)(?:/|$))[^/]+"


register_url_convertor("webhook_id", _WebhookIdConvertor())


async def require_json_content(request: Request) -> None:
    """415 unless a request that carries a body says it is JSON."""
    has_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in (
        request.headers
    )
    if not has_body:
        return
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json" and not (
        content_type.startswith("application/") and content_type.endswith("+json")
    ):
        raise AppError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            errors=[f"Content-Type must be application/json, not {content_type or 'missing'}"],
        )


JsonContent = Annotated[None, Depends(require_json_content)]


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


async def required_transaction_id(
    x_transaction_id: Annotated[
        str | None,
        Header(
            alias=TRANSACTION_ID_HEADER,
            description="A new client-generated UUID per request (required).",
        ),
    ] = None,
) -> uuid.UUID:
    if x_transaction_id is None or not x_transaction_id.strip():
        raise BadRequest(
            "x-transaction-id header is required (a new UUID per request)",
            code=ErrorCode.INVALID_TRANSACTION_ID,
        )
    try:
        return uuid.UUID(x_transaction_id.strip())
    except ValueError:
        raise BadRequest(
            "x-transaction-id must be a UUID", code=ErrorCode.INVALID_TRANSACTION_ID
        ) from None


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
    }
    return {
        status: {"model": ErrorBody, "description": descriptions.get(status, "Error.")}
        for status in (*statuses, 500)
    }
