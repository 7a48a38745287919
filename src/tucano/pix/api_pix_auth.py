"""How Tucano proves itself to a PSP's API Pix: mutual TLS with the client certificate the PSP
issued, and an OAuth2 client-credentials token, kept until shortly before it expires."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tucano.config import ConfigurationError
from tucano.pix.api_pix_schemas import PspError

# The scopes decisions.md names for charges, Pix and refunds, and apart those of the webhook's
# registration: a PSP that grants a client only the first must not refuse its every token.
SCOPES = "cob.write cob.read pix.write pix.read"
WEBHOOK_SCOPES = "webhook.write webhook.read"
# RFC 6749 recommends `expires_in`; a PSP that leaves it out gets its token asked again soon.
DEFAULT_TOKEN_SECONDS = 60
# A token is renewed this long before it expires (or a tenth of its life, if shorter), so that
# no call leaves with a token that expires on the way.
RENEW_MARGIN_SECONDS = 60.0


def client_ssl_context(
    *, cert_file: str | None, key_file: str | None, ca_file: str | None
) -> ssl.SSLContext:
    """Verifies the PSP against `ca_file` (the system's CAs when None) and presents the client
    certificate `cert_file` with its `key_file`, when given."""
    if bool(cert_file) != bool(key_file):
        raise ConfigurationError(
            "TUCANO_PIX_CERT_FILE and TUCANO_PIX_KEY_FILE go together: set both or neither"
        )
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as error:
        raise ConfigurationError(
            f"TUCANO_PIX_CA_FILE: cannot be read as PEM certificates ({error})"
        ) from None
    if cert_file and key_file:
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as error:
            raise ConfigurationError(
                "TUCANO_PIX_CERT_FILE and TUCANO_PIX_KEY_FILE: cannot be loaded as a PEM "
                f"certificate and its unencrypted key ({error})"
            ) from None
    return context


@dataclass(frozen=True)
class AccessToken:
    value: str
    renew_at: float  # on the cache's clock


def token_from(document: Any, *, status: int, asked_at: float) -> AccessToken:
    """The token of a successful token endpoint answer (RFC 6749, section 5.1)."""
    if not isinstance(document, dict):
        raise PspError(status, "about:blank", "Unreadable token answer")
    value, kind = document.get("access_token"), document.get("token_type", "Bearer")
    lifetime = document.get("expires_in", DEFAULT_TOKEN_SECONDS)
    if not isinstance(value, str) or not value or not isinstance(kind, str):
        raise PspError(status, "about:blank", "Unreadable token answer", "no access_token")
    if kind.lower() != "bearer":
        raise PspError(status, "about:blank", "Unreadable token answer", f"token_type {kind}")
    if isinstance(lifetime, str) and lifetime.isdigit():
        lifetime = int(lifetime)  # some PSPs send it as text
    if type(lifetime) is not int or lifetime <= 0:
        raise PspError(status, "about:blank", "Unreadable token answer", "expires_in")
    margin = min(RENEW_MARGIN_SECONDS, lifetime / 10)
    return AccessToken(value, asked_at + lifetime - margin)


# Asks the token endpoint with (form, headers, the clock's time when asked, the attempt of the
# call that needs it): the token, or a PspFailure.
TokenRequest = Callable[[dict[str, str], dict[str, str], float, int], Awaitable[AccessToken]]


class TokenCache:
    """One client's token: asked once when missing or due for renewal, however many calls wait
    for it at the time, and dropped when the PSP refuses it."""

    def __init__(
        self,
        *,
        client_id: str,
        client_secret: str,
        request: TokenRequest,
        clock: Callable[[], float] = time.monotonic,
        scope: str = SCOPES,
    ) -> None:
        self._scope = scope
        credentials = f"{client_id}:{client_secret}".encode()
        self._authorization = "Basic " + base64.b64encode(credentials).decode("ascii")
        self._request = request
        self._clock = clock
        self._token: AccessToken | None = None
        self._lock = asyncio.Lock()

    def _usable(self) -> str | None:
        token = self._token
        return token.value if token is not None and self._clock() < token.renew_at else None

    async def get(self, attempt: int = 1) -> str:
        """A token that is not due for renewal; `attempt` is the waiting call's, for the log."""
        value = self._usable()
        if value is not None:
            return value
        async with self._lock:
            value = self._usable()  # another call may have renewed it while this one waited
            if value is not None:
                return value
            form = {"grant_type": "client_credentials", "scope": self._scope}
            headers = {"Authorization": self._authorization}
            self._token = await self._request(form, headers, self._clock(), attempt)
            return self._token.value

    def drop(self, value: str) -> None:
        """Forget `value` (the PSP refused it), unless a newer token has replaced it already."""
        if self._token is not None and self._token.value == value:
            self._token = None
