"""The caller of a request: bearer token checked (401), then the operation's scope (403)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.security.base import SecurityBase

from tucano.api.dependencies import refuse_repeated_query_parameters
from tucano.api.deps import made_at_start, provided
from tucano.api.rate_limits import RateLimits
from tucano.auth.service import RevokedClients
from tucano.auth.tokens import InvalidToken, Principal, Scope, decode_access_token
from tucano.core.clock import clock
from tucano.core.errors import Forbidden, RateLimited, Unauthenticated


@dataclass(frozen=True)
class Callers:
    """What tells who a caller is and whether it may go on, made once at start-up (app.py)."""

    access_token_key: bytes  # signs and checks access tokens
    revoked_clients: RevokedClients  # kept fresh by a task of the application's
    rate_limits: RateLimits


# One dependency for all three: each level of FastAPI's dependency resolution costs more than
# the checks themselves, and every authenticated request makes them.
CallersDep = Annotated[Callers, Depends(provided("callers"))]


def current_principal(request: Request, callers: Callers) -> Principal:
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
        principal = decode_access_token(token, key=callers.access_token_key, now=clock.now())
    except InvalidToken as exc:
        raise Unauthenticated(str(exc)) from None
    if principal.client_id in callers.revoked_clients.ids:
        raise Unauthenticated("the API client of this access token has been revoked")
    request.state.customer_id = principal.customer_id
    return principal


class RequireScope(SecurityBase):
    """A dependency that answers 401 without a valid bearer token, 429 when its API client is
    over its rate limit, and 403 unless the token carries `scope`. One dependency, not a chain:
    each level of FastAPI's dependency resolution costs more than the check itself. As a
    security scheme of FastAPI's, it puts the bearer token in the OpenAPI document itself."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.scheme_name = "bearerAuth"
        self.model = HTTPBearerModel(
            bearerFormat="JWT",
            description="An access token from POST /oauth/v1/token (client credentials).",
        )

    async def before_body(self, request: Request) -> None:
        """The checks, made by the route before it reads the body (api/routing.py): a request
        without a valid token is answered 401 at once, however long its body would take."""
        request.state.principal = await self.checked_principal(request)

    async def __call__(self, request: Request) -> Principal:
        principal = getattr(request.state, "principal", None)
        if isinstance(principal, Principal):
            return principal  # checked before the body
        return await self.checked_principal(request)

    async def checked_principal(self, request: Request) -> Principal:
        # Not a CallersDep: every authenticated request would pay a level of resolution for it.
        callers = made_at_start(request, "callers", Callers)
        principal = current_principal(request, callers)
        # Before any session opens (the caller is each handler's first dependency): no query.
        retry_after = await callers.rate_limits.client_retry_after(principal.client_id)
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
PortalSessionOpener = Annotated[Principal, Depends(RequireScope(Scope.PORTAL_SESSION))]
