"""The route class of the portal's pages: whatever a page or its dependencies refuse (no
session, a read-only one, a forged form, a bad parameter) is answered as a page for a browser,
in its language, never as a stack trace."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.responses import Response

from tucano.api.errors import validation_lines
from tucano.core.errors import AppError, BadRequest
from tucano.portal.deps import checks_forms
from tucano.portal.rendering import error_answer


class PortalPageRoute(APIRoute):
    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        # Every action passes the session, read-only and forgery checks: a route that would
        # skip them is refused when it is declared, not found out in production.
        if (self.methods or set()) - {"GET", "HEAD"} and not _reads_a_signed_form(self):
            raise TypeError(f"portal action {path} must take its form through form_reader()")

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except AppError as error:
                return error_answer(request, error)
            except RequestValidationError as invalid:
                lines = validation_lines(invalid.errors())
                return error_answer(request, BadRequest(*lines))

        return page_handler


def _reads_a_signed_form(route: APIRoute) -> bool:
    pending = list(route.dependant.dependencies)
    while pending:
        dependency = pending.pop()
        if checks_forms(dependency.call):
            return True
        pending.extend(dependency.dependencies)
    return False
