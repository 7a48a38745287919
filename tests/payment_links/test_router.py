"""The payment-link interface's scopes, on each database."""

from __future__ import annotations

from tests.support.payment_links import (
    BASE,
    new_link,
    post_link,
    tx,
    window,
)
from tests.support.service import RunningService, assert_error_body
from tucano.auth.tokens import Scope
from tucano.core.errors import ErrorCode

# --- scopes --------------------------------------------------------------------------------


async def test_scopes_are_enforced(service: RunningService) -> None:
    reader = await service.merchant(scopes=[Scope.PAYMENT_LINK_READ])
    assert_error_body(await post_link(reader, new_link()), 403, ErrorCode.INSUFFICIENT_SCOPE)
    assert (
        await reader.get(f"{BASE}/link-payment", params=window(), headers=tx())
    ).status_code == 200
    writer_only = await service.merchant(scopes=[Scope.PAYMENT_LINK_WRITE])
    response = await writer_only.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert_error_body(response, 403, ErrorCode.INSUFFICIENT_SCOPE)
    anonymous = await service.http.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert_error_body(anonymous, 401, ErrorCode.UNAUTHENTICATED)
