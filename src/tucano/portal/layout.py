"""What every page of a session shows around its content: the navigation (the current section
marked), the customer, when the session ends, whether it is read-only, and the forgery field."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from tucano.brazil.brasilia_time import BRASILIA
from tucano.portal.deps import PageSession
from tucano.portal.rendering import render
from tucano.portal.texts import SECTIONS, TEXTS


def layout(page: PageSession, current: str | None) -> dict[str, Any]:
    t = TEXTS[page.language]
    return {
        "lang": page.language,
        "t": t,
        "nav": [
            {"key": key, "href": path, "label": t[f"nav_{key}"], "current": key == current}
            for key, path in SECTIONS
        ],
        "customer_id": page.customer_id,
        "customer": t["customer"].format(customer_id=page.customer_id),
        "session_until": t["session_until"].format(
            time=page.session.expires_at.astimezone(BRASILIA).strftime("%H:%M")
        ),
        "read_only": page.read_only,
        "csrf_token": page.csrf_token,
    }


def show(
    request: Request,
    page: PageSession,
    template: str,
    *,
    current: str | None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A page of the session: `template` inside the layout."""
    return render(request, template, status, **layout(page, current), **context)
