"""The caller of a request: bearer token checked (401), then the operation's scope (403)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tucano.api.dependencies import refuse_repeated_query_parameters
from tucano.auth.tokens import InvalidToken, Principal, Scope, decode_access_token
from tucano.core.clock import clock
from tucano.core.errors import Forbidden, RateLimited, Unauthenticated

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="bearerAuth",
    bearerFormat="JWT",
    description="An access token from POST /oauth/v1/token (client credentials).",
)


def current_principal(request: Request) -> Principal:
    """The caller named by the request's bearer token; 401 when there is none that is valid."""
    header = request.headers.get("authorization")
    if not header:
        raise Unauthenticated(
            "the Authorization header is missing; send Authorization: Bearer <token>",
            challenge="Bearer",
        )
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise Unauthenticated(
            "the Authorization header must be 'Bearer <token>'",
            challenge='Bearer error="invalid_request"',
        )
    try:
        principal = decode_access_token(
            token, key=request.app.state.access_token_key, now=clock.now()
        )
    except InvalidToken as exc:
        raise Unauthenticated(str(exc)) from None
    if principal.client_id in request.app.state.revoked_clients.ids:
        raise Unauthenticated("the API client of this access token has been revoked")
    request.state.customer_id = principal.customer_id
    return principal


class RequireScope:
    """A dependency that answers 401 without a valid bearer token, 429 when its API client is
    over its rate limit, and 403 unless the token carries `scope`. One dependency, not a chain:
    each level of FastAPI's dependency resolution costs more than the check itself.
    (`bearer_scheme` documents the header in OpenAPI; the header is read here.)"""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    async def __call__(
        self,
        request: Request,
        _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
    ) -> Principal:
        principal = current_principal(request)
        # Before any session opens (the caller is each handler's first dependency): no query.
        retry_after = await request.app.state.rate_limits.client_retry_after(principal.client_id)
        if retry_after is not None:
            raise RateLimited(
                f"this API client sent more requests than its rate limit allows; "
                f"retry after {retry_after} s",
                retry_after=retry_after,
            )
        if self.scope.value not in principal.scopes:
            raise Forbidden(f"this operation needs the scope {self.scope.value}")
        # Here rather than in a dependency of its own (see above), once the caller is known.
        refuse_repeated_query_parameters(request)
        return principal


WebhookReader = Annotated[Principal, Depends(RequireScope(Scope.WEBHOOK_READ))]
WebhookWriter = Annotated[Principal, Depends(RequireScope(Scope.WEBHOOK_WRITE))]
PaymentLinkReader = Annotated[Principal, Depends(RequireScope(Scope.PAYMENT_LINK_READ))]
PaymentLinkWriter = Annotated[Principal, Depends(RequireScope(Scope.PAYMENT_LINK_WRITE))]
EventPublisher = Annotated[Principal, Depends(RequireScope(Scope.EVENTS_PUBLISH))]
