"""Every portal action takes its form through form_reader (session, read-only and forgery
checks): a route that would not is refused when it is declared."""

from __future__ import annotations

from typing import Annotated

import pytest
from fastapi import APIRouter
from fastapi.responses import Response

from tucano.portal.deps import PageSessionDep, SignedForm, form_reader
from tucano.portal.routing import PortalPageRoute


def test_an_action_without_the_form_checks_cannot_be_declared() -> None:
    router = APIRouter(route_class=PortalPageRoute)

    async def unchecked(page: PageSessionDep) -> Response:
        return Response()

    with pytest.raises(TypeError, match="/portal/unchecked must take its form"):
        router.add_api_route("/portal/unchecked", unchecked, methods=["POST"])


def test_an_action_with_them_and_a_page_without_them_can() -> None:
    router = APIRouter(route_class=PortalPageRoute)

    async def checked(form: Annotated[SignedForm, form_reader("field")]) -> Response:
        return Response()

    async def page(session: PageSessionDep) -> Response:
        return Response()

    router.add_api_route("/portal/checked", checked, methods=["POST"])
    router.add_api_route("/portal/page", page, methods=["GET"])
    assert [route.path for route in router.routes] == ["/portal/checked", "/portal/page"]
