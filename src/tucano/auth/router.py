"""POST /oauth/v1/token: the client-credentials grant of RFC 6749 (4.4), form body or HTTP Basic."""

from __future__ import annotations

import base64
import binascii
from datetime import timedelta
from typing import Literal
from urllib.parse import parse_qsl, unquote

from fastapi import APIRouter, Request
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from tucano.api.dependencies import unsupported_content_encoding
from tucano.api.deps import DatabaseDep, SettingsDep
from tucano.api.wire import json_response
from tucano.auth.deps import CallersDep
from tucano.auth.schemas import TOKEN_REQUEST_BODY, OAuthError, TokenResponse
from tucano.auth.service import authenticate_client, parse_scopes
from tucano.auth.tokens import Principal, encode_access_token
from tucano.core.clock import clock

router = APIRouter(prefix="/oauth/v1", tags=["authentication"])

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
OAuthErrorCode = Literal[
    "invalid_request", "invalid_client", "unsupported_grant_type", "invalid_scope"
]
# What the token request defines (RFC 6749 4.4.2, 2.3.1); RFC 6749 3.2: others are ignored.
_TOKEN_PARAMETERS = frozenset({"grant_type", "client_id", "client_secret", "scope"})


def _oauth_error(
    error: OAuthErrorCode,
    description: str,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    status = status or (401 if error == "invalid_client" else 400)
    headers = {**_NO_STORE, **(headers or {})}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="tucano"'
    return json_response(
        OAuthError(error=error, error_description=description), status_code=status, headers=headers
    )


def _too_many(whom: str, retry_after: int) -> Response:
    return _oauth_error(
        "invalid_request",
        f"too many token requests {whom}; retry after {retry_after} s",
        status=429,
        headers={"Retry-After": str(retry_after)},
    )


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("the Basic credentials are not valid base64") from None
    client_id, sep, client_secret = decoded.partition(":")
    if not sep:
        raise ValueError("the Basic credentials must be client_id:client_secret")
    # RFC 6749 2.3.1: both parts are form-urlencoded before base64.
    return unquote(client_id.replace("+", " ")), unquote(client_secret.replace("+", " "))


@router.post(
    "/token",
    summary="Get an access token (client credentials)",
    response_model=TokenResponse,
    responses={
        400: {"model": OAuthError, "description": "Bad request (RFC 6749 5.2)."},
        401: {
            "model": OAuthError,
            "description": "No client authentication, an unknown client or a wrong secret.",
        },
        413: {"model": OAuthError, "description": "Body larger than 1 MiB."},
        429: {
            "model": OAuthError,
            "description": "Too many token requests from this address, or for this client_id "
            "from this address (TUCANO_TOKEN_RATE_LIMIT); retry after `Retry-After` seconds.",
        },
    },
    openapi_extra={"requestBody": TOKEN_REQUEST_BODY},
)
async def issue_token(
    request: Request,
    settings: SettingsDep,
    database: DatabaseDep,
    callers: CallersDep,
) -> Response:
    limits = callers.rate_limits
    host = request.client.host if request.client else ""
    retry_after = await limits.token_address_retry_after(host)
    if retry_after is not None:
        return _too_many("from this address", retry_after)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return _oauth_error("invalid_request", "the body must be application/x-www-form-urlencoded")
    encoding = unsupported_content_encoding(request)
    if encoding is not None:
        return _oauth_error(
            "invalid_request", f"Content-Encoding {encoding} is not supported: send the body as is"
        )
    try:
        raw = await request.body()
    except ClientDisconnect:
        # Gone before its body arrived: nobody reads this answer, and it is no fault of ours.
        return _oauth_error("invalid_request", "the client closed the connection mid-request")
    except HTTPException as exc:
        # Over the limit while streaming in (no Content-Length, so the edge could not tell), or
        # still arriving when its time ran out.
        if exc.status_code not in (408, 413):
            raise
        return _oauth_error(
            "invalid_request",
            str(exc.detail),
            status=exc.status_code,
            headers=dict(exc.headers or {}),
        )
    try:
        pairs = parse_qsl(raw.decode(), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return _oauth_error("invalid_request", "the body is not valid UTF-8")
    form: dict[str, str] = {}
    for key, value in pairs:
        if key not in _TOKEN_PARAMETERS:
            continue  # RFC 6749 3.2: parameters the server does not know are ignored
        if key in form:
            return _oauth_error("invalid_request", f"the parameter {key} is repeated")
        form[key] = value

    grant_type = form.get("grant_type")
    if not grant_type:
        return _oauth_error("invalid_request", "grant_type is required")
    if grant_type != "client_credentials":
        return _oauth_error(
            "unsupported_grant_type", "only grant_type=client_credentials is supported"
        )

    authorization = request.headers.get("authorization")
    basic: tuple[str, str] | None = None
    if authorization:
        try:
            basic = _basic_credentials(authorization)
        except ValueError as exc:
            return _oauth_error("invalid_client", str(exc))
    # RFC 6749 2.3: one authentication method per request (client_id alone may repeat Basic).
    if basic and ("client_secret" in form or form.get("client_id", basic[0]) != basic[0]):
        return _oauth_error(
            "invalid_request", "send the client credentials either in the body or with HTTP Basic"
        )
    client_id, client_secret = basic or (form.get("client_id", ""), form.get("client_secret", ""))
    if not client_id or not client_secret:
        # RFC 6749 5.2 names "no client authentication included" as invalid_client.
        return _oauth_error(
            "invalid_client", "client authentication is required: client_id and client_secret"
        )

    retry_after = await limits.token_client_retry_after(client_id, host)
    if retry_after is not None:
        return _too_many("for this client_id from this address", retry_after)
    # Opened only now: a request refused above (a guesser over its budget) costs no database work.
    async with database.read_session() as session:
        client = await authenticate_client(
            session, client_id=client_id, client_secret=client_secret
        )
    if client is None:
        return _oauth_error("invalid_client", "unknown client or wrong client secret")

    granted = set(client.scopes.split())
    if form.get("scope", "").strip():
        try:
            requested = {s.value for s in parse_scopes([form["scope"]])}
        except ValueError as exc:
            return _oauth_error("invalid_scope", str(exc))
        if not requested <= granted:
            missing = ", ".join(sorted(requested - granted))
            return _oauth_error("invalid_scope", f"the client is not granted: {missing}")
        granted = requested

    request.state.customer_id = client.customer_id
    ttl = timedelta(seconds=settings.access_token_ttl_seconds)
    principal = Principal(
        client_id=client.client_id,
        customer_id=client.customer_id,
        partner_id=client.partner_id,
        scopes=frozenset(granted),
    )
    token = encode_access_token(principal, key=callers.access_token_key, now=clock.now(), ttl=ttl)
    body = TokenResponse(
        access_token=token, expires_in=int(ttl.total_seconds()), scope=" ".join(sorted(granted))
    )
    return json_response(body, headers=_NO_STORE)
