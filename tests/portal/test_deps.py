"""What a portal action must pass before it changes anything: a session (401), one that is not
read-only (403), and the forgery field its own page gave, from a page of this site (403)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.portal import browser, csrf_token, open_portal
from tests.support.service import Merchant, RunningService, assert_error_body
from tucano.core.errors import ErrorCode


async def new_webhook(merchant: Merchant, path: str = "/hook") -> dict[str, Any]:
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": f"https://hooks.example.com{path}", "eventType": "PIX_OUTBOUND"},
    )
    assert created.status_code == 200, created.text
    return dict(created.json())


async def is_active(merchant: Merchant, webhook: dict[str, Any]) -> bool:
    return bool((await merchant.get(f"/webhook/v1/{webhook['webhookId']}")).json()["isActive"])


async def test_a_read_only_session_shows_no_actions_and_the_server_refuses_them(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    webhook = await new_webhook(merchant)
    deactivate = f"/portal/webhooks/{webhook['webhookId']}/deactivate"
    async with open_portal(merchant, readOnly=True) as client:
        page = await client.get("/portal/webhooks")
        assert "Sessão somente leitura" in page.text
        assert "hooks.example.com/hook" in page.text
        # The one form left is signing out; no action column either.
        assert page.text.count("<form") == 1 and 'action="/portal/sign-out"' in page.text
        assert "Desativar" not in page.text and "Ações" not in page.text
        refused = await client.post(deactivate, data={"csrf_token": csrf_token(page)})
        assert refused.status_code == 403
        assert "Esta sessão é somente leitura" in refused.text
        as_body = await client.post(
            deactivate, data={"csrf_token": csrf_token(page)}, headers={"accept": "*/*"}
        )
    assert_error_body(as_body, 403, ErrorCode.PORTAL_READ_ONLY)
    assert await is_active(merchant, webhook)


async def test_an_action_without_a_session_is_401(service: RunningService) -> None:
    merchant = await service.merchant()
    webhook = await new_webhook(merchant)
    async with browser(merchant) as client:
        refused = await client.post(
            f"/portal/webhooks/{webhook['webhookId']}/deactivate", data={"csrf_token": "x"}
        )
    assert refused.status_code == 401
    assert await is_active(merchant, webhook)


@pytest.mark.parametrize(
    ("form", "headers"),
    [
        ({"active": "false"}, {}),  # no field
        ({"csrf_token": ""}, {}),
        ({"csrf_token": "altered"}, {}),
        ("page", {"sec-fetch-site": "cross-site"}),  # the right field, from another site
        ("page", {"sec-fetch-site": "same-site"}),
        ("other session", {}),  # another session's field (of the same customer)
    ],
)
async def test_an_action_without_its_pages_forgery_field_changes_nothing(
    service: RunningService, form: Any, headers: dict[str, str]
) -> None:
    merchant = await service.merchant()
    webhook = await new_webhook(merchant)
    async with open_portal(merchant) as other:
        other_token = csrf_token(await other.get("/portal"))
    async with open_portal(merchant) as client:
        page = await client.get("/portal/webhooks")
        if form == "page":
            form = {"csrf_token": csrf_token(page)}
        elif form == "other session":
            form = {"csrf_token": other_token}
        refused = await client.post(
            f"/portal/webhooks/{webhook['webhookId']}/deactivate", data=form, headers=headers
        )
        assert refused.status_code == 403
        assert "Esta página expirou" in refused.text
        assert await is_active(merchant, webhook)
        as_body = await client.post(
            f"/portal/webhooks/{webhook['webhookId']}/deactivate",
            data=form,
            headers={**headers, "accept": "application/json"},
        )
    assert_error_body(as_body, 403, ErrorCode.PORTAL_FORM_EXPIRED)


async def test_an_action_with_its_pages_field_is_done(service: RunningService) -> None:
    merchant = await service.merchant()
    webhook = await new_webhook(merchant)
    async with open_portal(merchant) as client:
        page = await client.get("/portal/webhooks")
        done = await client.post(
            f"/portal/webhooks/{webhook['webhookId']}/deactivate",
            data={"csrf_token": csrf_token(page)},
            headers={"sec-fetch-site": "same-origin"},
        )
    assert done.status_code == 303
    assert not await is_active(merchant, webhook)


async def test_an_action_sent_as_json_is_refused(service: RunningService) -> None:
    merchant = await service.merchant()
    webhook = await new_webhook(merchant)
    async with open_portal(merchant) as client:
        page = await client.get("/portal/webhooks")
        refused = await client.post(
            f"/portal/webhooks/{webhook['webhookId']}/deactivate",
            json={"csrf_token": csrf_token(page)},
        )
    assert refused.status_code == 415
    assert await is_active(merchant, webhook)
