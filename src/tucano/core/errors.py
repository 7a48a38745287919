"""The typed errors services raise, and the table of every `errorCode`.

AppError                 carries an ErrorCode (its HTTP status and default message)
 ├─ BadRequest           400, with one line per problem in `errors`
 ├─ Unauthenticated      401, with a WWW-Authenticate: Bearer challenge
 ├─ Forbidden            403
 ├─ NotFound             404 (another customer's resource is answered exactly the same)
 ├─ Conflict             409
 └─ RateLimited          429, with Retry-After
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ErrorCode(IntEnum):
    """Every `errorCode` the service answers with; docs/errors.md is checked against this table."""

    def __new__(cls, value: int, status: int, message: str) -> ErrorCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.message = message
        return member

    status: int
    message: str

    UNEXPECTED = 1, 500, "Unexpected system error"
    UNAVAILABLE = 2, 503, "Service temporarily unavailable"
    UNAUTHENTICATED = 10, 401, "Missing, malformed, expired or invalid access token"
    INSUFFICIENT_SCOPE = 11, 403, "The access token does not grant this operation"
    ROUTE_NOT_FOUND = 20, 404, "No such route"
    METHOD_NOT_ALLOWED = 21, 405, "Method not allowed on this route"
    WEBHOOK_NOT_FOUND = 22, 404, "Webhook not found"
    PAYMENT_LINK_NOT_FOUND = 23, 404, "Payment link not found"
    EVENT_NOT_FOUND = 24, 404, "Event not found"
    WEBHOOK_INACTIVE = 25, 409, "Webhook is inactive"
    WEBHOOK_EVENT_MISMATCH = 26, 409, "Webhook does not receive this event type"
    WEBHOOK_LIMIT_REACHED = 27, 409, "Webhook limit reached"
    INVALID_PARAMETERS = 36, 400, "Invalid request parameters"
    MALFORMED_BODY = 37, 400, "Malformed request body"
    INVALID_TRANSACTION_ID = 38, 400, "Missing or invalid x-transaction-id header"
    WEBHOOK_TARGET_REFUSED = 39, 400, "Webhook target URL refused"
    PAYLOAD_TOO_LARGE = 41, 413, "Request body too large"
    UNSUPPORTED_MEDIA_TYPE = 42, 415, "Unsupported content type"
    IDEMPOTENCY_CONFLICT = 43, 409, "x-transaction-id already used with a different request"
    PAYMENT_LINK_NOT_PAYABLE = 44, 409, "Payment link cannot be paid"
    SANDBOX_ONLY = 45, 403, "Only available in the sandbox environment"
    PAYMENT_LINK_EXPIRED = 46, 410, "Payment link has expired"
    IDEMPOTENCY_KEY_CONFLICT = 47, 409, "Idempotency-Key already used with a different request"
    REQUEST_TIMEOUT = 48, 408, "The request body did not arrive in time"
    HEADERS_TOO_LARGE = 49, 431, "Request headers too large"
    CHECKOUT_FORM_EXPIRED = 50, 403, "The checkout form failed its anti-forgery check"
    CARD_REFUSED = 51, 402, "The card payment was refused"
    CARD_PAYMENT_LOCKED = 52, 429, "Card payment of this link is locked for a while"
    PAYMENT_METHOD_UNAVAILABLE = 53, 403, "This payment method is not offered for this link"
    CARD_PAYMENT_IN_PROGRESS = 54, 409, "Another card payment of this link is in progress"
    RATE_LIMITED = 55, 429, "Too many requests"
    PAYMENT_LINK_NOT_CANCELLABLE = 56, 409, "Payment link cannot be cancelled"
    PAYMENT_LINK_NOT_REFUNDABLE = 57, 409, "Payment link cannot be refunded"
    REFUND_IDEMPOTENCY_CONFLICT = 58, 409, "x-transaction-id already used for another refund"
    PORTAL_LINK_INVALID = 59, 401, "The portal session URL is not valid"
    PORTAL_LINK_USED = 60, 410, "The portal session URL was already used"
    PORTAL_LINK_EXPIRED = 61, 410, "The portal session URL has expired"
    PORTAL_SESSION_ENDED = 62, 401, "No portal session, or it has ended"
    PORTAL_READ_ONLY = 63, 403, "The portal session is read-only"
    PORTAL_FORM_EXPIRED = 64, 403, "The portal form failed its anti-forgery check"


class AppError(Exception):
    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        *,
        errors: Iterable[str] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        self.code = code
        self.message = message or code.message
        self.errors = list(errors)
        self.headers = headers or {}
        super().__init__(self.message)

    @property
    def status_code(self) -> int:
        return self.code.status


class BadRequest(AppError):
    def __init__(
        self,
        *errors: str,
        code: ErrorCode = ErrorCode.INVALID_PARAMETERS,
        message: str | None = None,
    ) -> None:
        super().__init__(code, message, errors=errors)


class Unauthenticated(AppError):
    """`challenge` follows RFC 6750 section 3.1: a bare `Bearer` when the request carried no
    credentials at all, an error code only when it carried some that failed."""

    def __init__(self, reason: str, challenge: str = 'Bearer error="invalid_token"') -> None:
        super().__init__(
            ErrorCode.UNAUTHENTICATED,
            errors=[reason],
            headers={"WWW-Authenticate": challenge},
        )


class Forbidden(AppError):
    def __init__(self, reason: str, code: ErrorCode = ErrorCode.INSUFFICIENT_SCOPE) -> None:
        super().__init__(code, errors=[reason])


class NotFound(AppError):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code)


class Conflict(AppError):
    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(code, errors=[reason])


class RateLimited(AppError):
    """Over a rate limit: `retry_after` whole seconds (at least 1) until one more is allowed."""

    def __init__(self, reason: str, *, retry_after: int) -> None:
        super().__init__(
            ErrorCode.RATE_LIMITED,
            errors=[reason],
            headers={"Retry-After": str(max(1, retry_after))},
        )
