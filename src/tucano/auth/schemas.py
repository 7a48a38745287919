from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["Bearer"] = "Bearer"  # noqa: S105 - the scheme name, not a secret
    expires_in: int = Field(description="Seconds until the token expires.")
    scope: str = Field(description="Space-separated scopes the token carries.")


class OAuthError(BaseModel):
    """RFC 6749 section 5.2 error body (the token endpoint's own error shape)."""

    error: Literal[
        "invalid_request",
        "invalid_client",
        "unsupported_grant_type",
        "invalid_scope",
        # The server's own (RFC 6749 4.1.2.1's codes): a fault, or the database unavailable.
        "server_error",
        "temporarily_unavailable",
    ]
    error_description: str


TOKEN_REQUEST_BODY = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "required": ["grant_type"],
                "properties": {
                    "grant_type": {"type": "string", "enum": ["client_credentials"]},
                    "client_id": {
                        "type": "string",
                        "description": "Required unless both are sent with HTTP Basic.",
                    },
                    "client_secret": {
                        "type": "string",
                        "description": "Required unless both are sent with HTTP Basic.",
                    },
                    "scope": {
                        "type": "string",
                        "description": "Space-separated subset of the client's scopes; "
                        "all of them when omitted.",
                    },
                },
            }
        }
    },
}
