"""What the portal's routes work with: its start-up bundle, and the session a page runs in
(401 without one, 403 for an action in a read-only one or a form that fails its forgery check)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from tucano.api.deps import made_at_start, provided
from tucano.api.forms import LONGEST_VALUE, read_form
from tucano.config import Settings
from tucano.core import csrf
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.core.languages import Language, preferred_language
from tucano.db.database import Database
from tucano.portal import service
from tucano.portal.rendering import Site
from tucano.portal.service import OpenSession

KEY_PURPOSE = "portal-csrf"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class Portal:
    site: Site
    database: Database
    settings: Settings

    @classmethod
    def of(cls, settings: Settings, database: Database, *, csrf_key: bytes) -> Portal:
        return cls(Site.of(settings, csrf_key=csrf_key), database, settings)


PortalDep = Annotated[Portal, Depends(provided("portal"))]


@dataclass(frozen=True)
class PageSession:
    """The session a page runs in, and the language it speaks."""

    session: OpenSession
    language: Language
    csrf_token: str  # every form of its pages carries it

    @property
    def customer_id(self) -> int:
        return self.session.customer_id

    @property
    def read_only(self) -> bool:
        return self.session.read_only


async def current_session(request: Request) -> PageSession:
    """The open session the request's cookie holds; 401 without one."""
    portal = made_at_start(request, "portal", Portal)
    async with portal.database.read_session() as session:
        found = await service.session_of_cookie(
            session, cookie=request.cookies.get(portal.site.cookie_name), now=clock.now()
        )
    if found is None:
        raise AppError(
            ErrorCode.PORTAL_SESSION_ENDED,
            errors=["open the portal with a new session URL (POST /portal/v1/sessions)"],
        )
    language = found.locale or preferred_language(request.headers.get("accept-language", ""))
    request.state.portal_language = language
    request.state.customer_id = found.customer_id  # for the request's log line
    token = csrf.form_token(portal.site.csrf_key, f"portal-session:{found.id}")
    return PageSession(found, language, token)


PageSessionDep = Annotated[PageSession, Depends(current_session)]


@dataclass(frozen=True)
class SignedForm:
    """A form posted from one of the session's own pages."""

    page: PageSession
    fields: dict[str, str]


def form_reader(*fields: str, writes: bool = True, longest_value: int = LONGEST_VALUE) -> Any:
    """A dependency that gives the posted form's `fields` once it passed its checks: a session
    (401), not read-only when the form `writes` (403), and the session's own forgery field from
    one of its pages (403). A value longer than `longest_value` is a 400."""
    known = frozenset({CSRF_FIELD, *fields})

    async def signed_form(request: Request, page: PageSessionDep) -> SignedForm:
        if writes and page.read_only:
            raise AppError(
                ErrorCode.PORTAL_READ_ONLY, errors=["this session was opened with readOnly: true"]
            )
        # Refused before the body is read: another site's page may not post here at all.
        if csrf.comes_from_another_site(request.headers):
            raise _forged()
        form = await read_form(request, known, longest_value=longest_value)
        portal = made_at_start(request, "portal", Portal)
        binding = f"portal-session:{page.session.id}"
        if not csrf.is_genuine(portal.site.csrf_key, binding, form.pop(CSRF_FIELD, None)):
            raise _forged()
        return SignedForm(page, form)

    signed_form.checks_portal_forms = True  # type: ignore[attr-defined]
    return Depends(signed_form)


def checks_forms(call: object) -> bool:
    """Whether a dependency is form_reader's (routing.py requires one on every action)."""
    return getattr(call, "checks_portal_forms", False) is True


def _forged() -> AppError:
    return AppError(
        ErrorCode.PORTAL_FORM_EXPIRED,
        errors=["the form must be sent from a page of this session, as that page gave it"],
    )
