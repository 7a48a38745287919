"""The fake PSP's OAuth2 client credentials grant (RFC 6749 section 4.4), the guard every API
Pix call passes (a live bearer token with the operation's scope), and the JSON answers both
give.

Token endpoint errors are OAuth's (`{"error": "invalid_client"}`); a missing, unknown or expired
bearer token is a 401 RFC 7807 problem of type `about:blank`, as the API Pix spec names no type
for it; a token without the scope is the spec's 403 `AcessoNegado`.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import orjson
from aiohttp import web

from tests.support.fake_psp_model import Problem

TOKEN_PATH = "/oauth/token"
SCOPES = ("cob.write", "cob.read", "pix.write", "pix.read", "webhook.write", "webhook.read")
CLIENT_ID = "tucano-at-fake-psp"
CLIENT_SECRET = "fake-psp-client-secret"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_response(
    body: Any, status: int = 200, content_type: str = "application/json"
) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=content_type)


def problem_response(problem: Problem) -> web.Response:
    return json_response(problem.document(), problem.status, "application/problem+json")


class OAuthServer:
    """Issues tokens to one client and checks them; `token_ttl_seconds` may change mid-test."""

    def __init__(
        self,
        *,
        client_id: str = CLIENT_ID,
        client_secret: str = CLIENT_SECRET,
        scopes: Iterable[str] = SCOPES,
        token_ttl_seconds: int = 3600,
    ) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.scopes = frozenset(scopes)
        self.token_ttl_seconds = token_ttl_seconds
        self.tokens_issued = 0
        self._tokens: dict[str, tuple[float, frozenset[str]]] = {}

    def revoke(self) -> None:
        """Forget every token issued, as a PSP that rotated its keys would."""
        self._tokens.clear()

    def _client_of(self, request: web.Request, form: dict[str, str]) -> tuple[str, str]:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return "", ""
            return user, password
        return form.get("client_id", ""), form.get("client_secret", "")

    async def token(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
        client_id, secret = self._client_of(request, form)
        if not (
            secrets.compare_digest(client_id.encode(), self.client_id.encode())
            and secrets.compare_digest(secret.encode(), self.client_secret.encode())
        ):
            response = json_response({"error": "invalid_client"}, 401)
            response.headers["WWW-Authenticate"] = 'Basic realm="fake-psp"'
            return response
        if form.get("grant_type") != "client_credentials":
            return json_response({"error": "unsupported_grant_type"}, 400)
        asked = frozenset(form["scope"].split()) if "scope" in form else self.scopes
        if not asked <= self.scopes:
            return json_response({"error": "invalid_scope"}, 400)
        token = secrets.token_urlsafe(24)
        self._tokens[token] = (time.monotonic() + self.token_ttl_seconds, asked)
        self.tokens_issued += 1
        return json_response(
            {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.token_ttl_seconds,
                "scope": " ".join(sorted(asked)),
            }
        )

    def scoped(self, scope: str, handler: Handler) -> Handler:
        """`handler` behind a check of the bearer token and its `scope`."""

        async def authorized(request: web.Request) -> web.StreamResponse:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            granted = self._tokens.get(token) if scheme.lower() == "bearer" else None
            if granted is None or granted[0] <= time.monotonic():
                unauthorized = {
                    "type": "about:blank",
                    "title": "Unauthorized",
                    "status": 401,
                    "detail": "Token de acesso ausente, inválido ou expirado.",
                }
                response = json_response(unauthorized, 401, "application/problem+json")
                response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
                return response
            if scope not in granted[1]:
                raise Problem(403, "AcessoNegado", f"O token não tem o escopo {scope}.")
            return await handler(request)

        return authorized
