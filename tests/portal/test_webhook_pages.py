"""The portal's webhooks list: each of the customer's webhooks with its target, event type,
state, success rate and last attempt (from real deliveries to a loopback receiver), switched off
and on from the list, never another customer's."""

from __future__ import annotations

import re

import pytest

from tests.support.deliveries import register, results_for
from tests.support.portal import csrf_token, open_portal
from tests.support.receivers import Receiver, always
from tests.support.service import RunningService
from tucano.portal import pages


def row_of(page: str, webhook_id: int) -> str:
    found = re.search(rf'<tr data-webhook-id="{webhook_id}">(.*?)</tr>', page, re.S)
    assert found, page
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


async def test_each_webhook_shows_its_success_rate_and_last_attempt(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    receiver.behaviours["/down"] = always(500)
    ok = await register(merchant, receiver, "/ok", "PIX_OUTBOUND")
    down = await register(merchant, receiver, "/down", "PIX_QR_INBOUND")
    idle = await register(merchant, receiver, "/idle", "CARD_CHARGEBACK")
    for event_type in ("PIX_OUTBOUND", "PIX_OUTBOUND", "PIX_QR_INBOUND"):
        sent = await merchant.post("/webhook/v1/test-events", json={"eventType": event_type})
        assert sent.status_code == 202, sent.text
    await results_for(merchant, 2, webhookId=ok["webhookId"])
    # Its first attempt and both retries (TUCANO_RETRY_SCHEDULE is 300ms,600ms here).
    await results_for(merchant, 3, webhookId=down["webhookId"])
    async with open_portal(merchant, language="en") as client:
        page = (await client.get("/portal/webhooks")).text
    assert row_of(page, ok["webhookId"]).startswith(
        f"{receiver.url('/ok')} PIX_OUTBOUND Yes 100% (2 of 2) "
    )
    assert row_of(page, ok["webhookId"]).endswith("succeeded · HTTP 200 Deactivate")
    failing = row_of(page, down["webhookId"])
    assert "0% (0 of 3)" in failing and "failed; retries exhausted · HTTP 500" in failing
    assert row_of(page, idle["webhookId"]) == (
        f"{receiver.url('/idle')} CARD_CHARGEBACK Yes None None Deactivate"
    )
    assert '<th scope="col">Success (7 days)</th>' in page
    assert '<th scope="col">Last attempt</th>' in page


async def test_a_webhook_is_switched_off_and_on_from_the_list(service: RunningService) -> None:
    merchant = await service.merchant()
    other = await service.merchant()
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://hooks.example.com/on-off", "eventType": "PIX_OUTBOUND"},
    )
    theirs = await other.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://other.example.com/x", "eventType": "PIX_OUTBOUND"},
    )
    webhook_id, their_id = created.json()["webhookId"], theirs.json()["webhookId"]
    async with open_portal(merchant) as client:
        page = await client.get("/portal/webhooks")
        token = csrf_token(page)
        off = await client.post(
            f"/portal/webhooks/{webhook_id}/deactivate", data={"csrf_token": token}
        )
        assert off.status_code == 303
        assert off.headers["location"] == "/portal/webhooks?done=deactivated"
        listed = (await client.get(off.headers["location"])).text
        assert 'role="status">Webhook desativado' in listed
        assert row_of(listed, webhook_id).endswith("Não Nenhuma Nenhuma Ativar")
        on = await client.post(
            f"/portal/webhooks/{webhook_id}/activate", data={"csrf_token": token}
        )
        assert on.headers["location"] == "/portal/webhooks?done=activated"
        # Another customer's webhook is not found, and stays as it was.
        theirs_off = await client.post(
            f"/portal/webhooks/{their_id}/deactivate", data={"csrf_token": token}
        )
        nonsense = await client.post("/portal/webhooks/abc/deactivate", data={"csrf_token": token})
    assert (await merchant.get(f"/webhook/v1/{webhook_id}")).json()["isActive"] is True
    assert theirs_off.status_code == 404
    assert "Não encontrado" in theirs_off.text
    assert (await other.get(f"/webhook/v1/{their_id}")).json()["isActive"] is True
    assert nonsense.status_code in (400, 404)


async def test_a_customer_without_webhooks_is_told_so(service: RunningService) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant) as client:
        page = (await client.get("/portal/webhooks")).text
    assert "Nenhum webhook cadastrado ainda." in page
    assert "<table" not in page


async def test_many_webhooks_are_listed_a_page_at_a_time(
    service: RunningService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "WEBHOOKS_PER_PAGE", 2)
    merchant = await service.merchant()
    for n in range(3):
        await merchant.post(
            "/webhook/v1/create",
            json={"targetUrl": f"https://hooks.example.com/{n}", "eventType": "PIX_OUTBOUND"},
        )
    async with open_portal(merchant) as client:
        first = (await client.get("/portal/webhooks")).text
        second = (await client.get("/portal/webhooks?page=1")).text
        beyond = await client.get("/portal/webhooks?page=-1")
    assert "hooks.example.com/1" in first and "hooks.example.com/2" not in first
    assert "Página 1 de 2" in first and 'href="/portal/webhooks?page=1">Próxima página' in first
    assert "hooks.example.com/2" in second and "hooks.example.com/0" not in second
    assert 'href="/portal/webhooks?page=0">Página anterior' in second
    assert beyond.status_code == 400
