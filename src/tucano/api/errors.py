"""The one error body of every interface, and the handlers that turn whatever escapes a request
(`AppError`, framework errors, validation) into it; the edge middleware does the same for a
crash.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from tucano.api.routing import NESTED_TOO_DEEPLY, InvalidBodyField
from tucano.api.wire import ApiModel, json_response
from tucano.core.clock import clock, format_utc
from tucano.core.errors import AppError, ErrorCode
from tucano.core.json_codec import written_path

log = structlog.get_logger("tucano.errors")


class ErrorBody(ApiModel):
    """The body of every error response."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "errorCode": 36,
                "message": "Invalid request parameters",
                "timestamp": "2026-01-15T10:30:00.000Z",
                "xTransactionId": "4f3c9b4e-8f5a-4c1e-9a53-2f1d2b6c7e10",
                "errors": ["amount must be greater than or equal to 0.01"],
            }
        }
    )

    error_code: int = Field(description="See docs/errors.md for the table of codes.")
    message: str
    timestamp: str = Field(
        description="ISO 8601 UTC with milliseconds.", json_schema_extra={"format": "date-time"}
    )
    x_transaction_id: str = Field(description="The request's x-transaction-id.")
    errors: list[str] = Field(description="One line per problem, naming the field.")


def transaction_id_of(scope_state: dict[str, Any]) -> str:
    return str(scope_state.get("transaction_id", ""))


def error_response(
    code: ErrorCode,
    transaction_id: str,
    *,
    message: str | None = None,
    errors: Sequence[str] = (),
    status_code: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body = {
        "errorCode": int(code),
        "message": _encodable(message or code.message),
        "timestamp": format_utc(clock.now()),
        "xTransactionId": transaction_id,
        "errors": [_encodable(line) for line in errors],
    }
    return json_response(body, status_code=status_code or code.status, headers=headers)


OAUTH_PREFIX = "/oauth/"
# RFC 6749 5.2 names the client errors; for the server's own, the codes of its 4.1.2.1.
_OAUTH_ERROR_OF_STATUS = {500: "server_error", 503: "temporarily_unavailable"}


def answers_the_oauth_way(path: str, status: int) -> bool:
    """The token endpoint answers every error in RFC 6749's shape, whatever its cause (a path
    under /oauth/ that is no route is a 404 like any other)."""
    return path.startswith(OAUTH_PREFIX) and status != 404


def oauth_error_response(
    status: int, description: str, *, headers: dict[str, str] | None = None
) -> Response:
    """An error of the token endpoint that its own route did not answer (a limit at the edge,
    a method, the database): `invalid_request`, or the server's code for a 500 or 503."""
    return json_response(
        {
            "error": _OAUTH_ERROR_OF_STATUS.get(status, "invalid_request"),
            "error_description": _encodable(description),
        },
        status_code=status,
        headers={**(headers or {}), "Cache-Control": "no-store"},
    )


def _encodable(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (a JSON key "\\ud800" named in an error)
    is written as its escape, \\ud800, rather than fail the answer."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# --- turning pydantic's validation errors into one readable line per problem -----------------

_INPUT_SHOULD = re.compile(r"^(Input|Value) should (be|have) ")


def field_name(loc: Sequence[int | str]) -> str:
    """('body', 'payer', 'name') -> 'payer.name'; ('query', 'size') -> 'size'; lists as [i]."""
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path", "header") else list(loc)
    if loc and loc[0] == "body" and len(parts) == 1 and isinstance(parts[0], int):
        parts = []  # a JSON decode error's position, not a field
    name = written_path(parts)
    if not name:
        return "body" if loc and loc[0] == "body" else "request"
    return name


_DECIMAL_REPR = re.compile(r"^Decimal\('(.*)'\)$")


def _bound(value: object) -> str:
    """A limit as a client wrote it: pydantic hands Decimal limits over as their repr."""
    text = str(value)
    match = _DECIMAL_REPR.match(text)
    return match.group(1) if match else text


def describe_validation_error(error: dict[str, Any]) -> str:
    field = field_name(error.get("loc", ()))
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    message = str(error.get("msg", "is invalid"))
    simple = {
        "missing": "is required",
        "json_invalid": "is not valid JSON",
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "bool_type": "must be a boolean (true or false)",
        "bool_parsing": "must be a boolean (true or false)",
        "string_type": "must be a string",
        "decimal_type": "must be a number",
        "decimal_parsing": "must be a number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "finite_number": "must be a finite number",
        "dict_type": "must be a JSON object",
        "model_type": "must be a JSON object",
        "model_attributes_type": "must be a JSON object",
        "list_type": "must be a list",
        "uuid_type": "must be a UUID",
        "uuid_parsing": "must be a UUID",
        "datetime_type": "must be an ISO 8601 timestamp",
        "datetime_parsing": "must be an ISO 8601 timestamp such as 2026-01-15T10:30:00.000Z",
        "datetime_from_date_parsing": (
            "must be an ISO 8601 timestamp such as 2026-01-15T10:30:00.000Z"
        ),
        "extra_forbidden": "is not a known field",
    }
    if kind == "json_invalid" and ctx.get("error") == NESTED_TOO_DEEPLY:
        text = "is nested too deeply (arrays and objects within each other)"
    elif kind in simple:
        text = simple[kind]
    elif kind == "greater_than_equal":
        text = f"must be greater than or equal to {_bound(ctx.get('ge'))}"
    elif kind == "greater_than":
        text = f"must be greater than {_bound(ctx.get('gt'))}"
    elif kind == "less_than_equal":
        text = f"must be less than or equal to {_bound(ctx.get('le'))}"
    elif kind == "less_than":
        text = f"must be less than {_bound(ctx.get('lt'))}"
    elif kind in ("string_too_short", "too_short"):
        minimum = ctx.get("min_length")
        units = "items" if ctx.get("field_type") == "List" else "characters"
        text = "must not be empty" if minimum == 1 else f"must have at least {minimum} {units}"
    elif kind in ("string_too_long", "too_long"):
        units = "items" if ctx.get("field_type") == "List" else "characters"
        text = f"must have at most {ctx.get('max_length')} {units}"
    elif kind == "string_pattern_mismatch":
        text = f"must match the pattern {ctx.get('pattern')}"
    elif kind == "decimal_max_places":
        text = f"must have at most {ctx.get('decimal_places')} decimal places"
    elif kind == "decimal_max_digits":
        text = "has too many digits"
    elif kind == "enum" or kind == "literal_error":
        text = f"must be one of: {str(ctx.get('expected', '')).replace(' or ', ', ')}".replace(
            "'", ""
        )
    elif kind == "value_error":
        text = str(ctx.get("error", message)).removeprefix("Value error, ")
    else:
        text = _INPUT_SHOULD.sub(lambda m: f"must {m.group(2)} ", message)
    return f"{field} {text}"


def validation_lines(errors: Iterable[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for error in errors:
        line = describe_validation_error(error)
        if line not in lines:
            lines.append(line)
    return lines


# --- handlers ------------------------------------------------------------------------------------


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette names only the first route's)."""
    allowed = []
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        probe = {**request.scope, "method": method}
        if any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.insert(allowed.index("GET") + 1, "HEAD")  # EdgeMiddleware answers HEAD as GET
    return allowed


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AppError)
    async def _app_error(request: Request, exc: AppError) -> Response:
        return error_response(
            exc.code,
            transaction_id_of(request.scope.get("state", {})),
            message=exc.message,
            errors=exc.errors,
            headers=exc.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = list(exc.errors())
        code = ErrorCode.INVALID_PARAMETERS
        if any(e.get("type") == "json_invalid" for e in errors):
            code = ErrorCode.MALFORMED_BODY
        elif any(field_name(e.get("loc", ())) == "x-transaction-id" for e in errors):
            code = ErrorCode.INVALID_TRANSACTION_ID
        return error_response(
            code, transaction_id_of(request.scope.get("state", {})), errors=validation_lines(errors)
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        by_status = {
            400: ErrorCode.MALFORMED_BODY,
            404: ErrorCode.ROUTE_NOT_FOUND,
            405: ErrorCode.METHOD_NOT_ALLOWED,
            408: ErrorCode.REQUEST_TIMEOUT,
            413: ErrorCode.PAYLOAD_TOO_LARGE,
            415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            503: ErrorCode.UNAVAILABLE,
        }
        code = by_status.get(exc.status_code, ErrorCode.UNEXPECTED)
        errors: list[str] = []
        headers = dict(exc.headers or {})
        if isinstance(exc, InvalidBodyField):
            code, errors = ErrorCode.INVALID_PARAMETERS, [str(exc.detail)]
        elif exc.status_code == 404:
            errors = [f"{request.method} {request.url.path[:200]} is not a route of this service"]
        elif exc.status_code == 405:
            errors = [f"{request.method} is not allowed on {request.url.path[:200]}"]
            headers = {"Allow": ", ".join(_allowed_methods(request))}
        elif exc.status_code in (408, 413):
            errors = [str(exc.detail)]
        elif exc.status_code == 400:
            # FastAPI's answer when reading the body failed for a reason JSON parsing did not name.
            errors = ["body could not be read as JSON"]
        status = exc.status_code if exc.status_code >= 400 else 500
        if answers_the_oauth_way(request.url.path, status):
            return oauth_error_response(status, (*errors, code.message)[0], headers=headers)
        return error_response(
            code,
            transaction_id_of(request.scope.get("state", {})),
            errors=errors,
            status_code=status,
            headers=headers,
        )
