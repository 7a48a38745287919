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
from tucano.portal.rendering import error_answer


class PortalPageRoute(APIRoute):
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
