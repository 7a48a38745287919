"""The portal's wire models: asking for a session URL, and the URL given."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, StrictBool, StrictInt

from tucano.api.wire import ApiModel, UtcTimestamp
from tucano.portal.service import DEFAULT_LIFETIME, LONGEST_LIFETIME, SHORTEST_LIFETIME


class PortalSessionCreate(ApiModel):
    """Every field optional."""

    read_only: StrictBool = Field(
        default=False,
        description="true: the portal shows no actions and refuses them (403); for people who "
        "should only look.",
    )
    expires_in_seconds: StrictInt = Field(
        default=int(DEFAULT_LIFETIME.total_seconds()),
        ge=int(SHORTEST_LIFETIME.total_seconds()),
        le=int(LONGEST_LIFETIME.total_seconds()),
        description="How long the URL, and the session it opens, last (60 to 86400; default 3600).",
    )
    locale: Literal["pt-BR", "en"] | None = Field(
        default=None,
        description="The portal's language; left out, the browser's Accept-Language decides "
        "(Portuguese unless it prefers English).",
    )


class PortalSessionCreated(ApiModel):
    url: str = Field(
        description="Open it in a browser (or an iframe) once: it sets the session's cookie and "
        "leads to the portal, without the token in the address. A second use is refused.",
        examples=["https://pay.example.com/portal/start?token=Wm9v..."],
    )
    expires_at: UtcTimestamp = Field(
        description="When the URL stops working if unused, and when the session it opens ends."
    )

    @classmethod
    def at(cls, url: str, expires_at: datetime) -> PortalSessionCreated:
        return cls(url=url, expires_at=expires_at)
