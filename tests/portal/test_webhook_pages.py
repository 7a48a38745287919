"""The portal's webhooks: the list (each of the customer's webhooks with its target, event type,
state, success rate and last attempt, from real deliveries to a loopback receiver), switching one
off and on, and each webhook's page: its signing secret revealed and rotated, a test event that
reaches a real receiver signed, deletion; none of it in a read-only session, and never another
customer's webhook."""

from __future__ import annotations

import re

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.deliveries import register, results_for
from tests.support.portal import csrf_token, open_portal
from tests.support.receivers import Receiver, always
from tests.support.service import Merchant, RunningService
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


# --- a webhook's own page: secret, rotation, test events, deletion ------------------------------


def words(page: str) -> str:
    """The page's text as a person reads it: tags dropped, spaces squeezed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)).strip()


async def made(merchant: Merchant, url: str, event_type: str = "PIX_OUTBOUND") -> int:
    created = await merchant.post(
        "/webhook/v1/create", json={"targetUrl": url, "eventType": event_type}
    )
    assert created.status_code == 200, created.text
    return int(created.json()["webhookId"])


async def test_the_signing_secret_is_shown_only_when_asked_for(service: RunningService) -> None:
    merchant = await service.merchant()
    webhook_id = await made(merchant, "https://hooks.example.com/secret")
    secret = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"]
    async with open_portal(merchant, language="en") as client:
        listed = (await client.get("/portal/webhooks")).text
        own = await client.get(f"/portal/webhooks/{webhook_id}")
        revealed = await client.post(
            f"/portal/webhooks/{webhook_id}/secret", data={"csrf_token": csrf_token(own)}
        )
        again = (await client.get(f"/portal/webhooks/{webhook_id}")).text
    assert f'href="/portal/webhooks/{webhook_id}">https://hooks.example.com/secret' in listed
    assert "whsec_" not in listed and "whsec_" not in own.text and "whsec_" not in again
    assert "Reveal secret" in own.text
    assert revealed.status_code == 200
    assert 'id="secret-value" class="secret-value" type="text" readonly' in revealed.text
    assert f'value="{secret}"' in revealed.text
    assert '<label for="secret-value">Current signing secret</label>' in revealed.text
    assert (
        "Cache-Control" not in revealed.headers or revealed.headers["cache-control"] == "no-store"
    )


async def test_rotating_the_secret_asks_first_then_shows_the_new_one_once(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    webhook_id = await made(merchant, "https://hooks.example.com/rotate")
    old = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"]
    async with open_portal(merchant, language="en") as client:
        own = (await client.get(f"/portal/webhooks/{webhook_id}")).text
        asked = await client.get(f"/portal/webhooks/{webhook_id}/rotate")
        # Asking is not rotating.
        unchanged = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"]
        rotated = await client.post(
            f"/portal/webhooks/{webhook_id}/rotate", data={"csrf_token": csrf_token(asked)}
        )
        after = (await client.get(f"/portal/webhooks/{webhook_id}")).text
    assert f'href="/portal/webhooks/{webhook_id}/rotate">Rotate secret</a>' in own
    assert "Rotate the signing secret?" in words(asked.text)
    assert "keeps signing beside it for 24 hours" in words(asked.text)
    assert unchanged == old
    now = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()
    assert now["secret"] != old and now["previousSecretExpiresAt"] is not None
    assert rotated.status_code == 200
    assert f'value="{now["secret"]}"' in rotated.text and old not in rotated.text
    said = words(rotated.text)
    assert (
        "Secret rotated. This is the new one; the old one keeps signing deliveries beside it "
        "for 24 hours, until" in said
    )
    assert now["secret"] not in after


async def test_a_webhook_is_deleted_after_a_confirmation(service: RunningService) -> None:
    merchant = await service.merchant()
    webhook_id = await made(merchant, "https://hooks.example.com/delete-me")
    kept_id = await made(merchant, "https://hooks.example.com/keep-me")
    async with open_portal(merchant, language="en") as client:
        own = (await client.get(f"/portal/webhooks/{webhook_id}")).text
        asked = await client.get(f"/portal/webhooks/{webhook_id}/delete")
        still = await merchant.get(f"/webhook/v1/{webhook_id}")
        deleted = await client.post(
            f"/portal/webhooks/{webhook_id}/delete", data={"csrf_token": csrf_token(asked)}
        )
        listed = (await client.get(deleted.headers["location"])).text
        gone = await client.get(f"/portal/webhooks/{webhook_id}")
    assert f'href="/portal/webhooks/{webhook_id}/delete">Delete webhook</a>' in own
    assert "Delete this webhook? https://hooks.example.com/delete-me gets no more events" in words(
        asked.text
    )
    assert still.status_code == 200
    assert deleted.status_code == 303
    assert deleted.headers["location"] == "/portal/webhooks?done=deleted"
    assert 'role="status">Webhook deleted.' in listed
    assert "delete-me" not in listed and "keep-me" in listed
    assert (await merchant.get(f"/webhook/v1/{webhook_id}")).status_code == 404
    assert (await merchant.get(f"/webhook/v1/{kept_id}")).status_code == 200
    assert gone.status_code == 404


async def test_a_test_event_reaches_the_webhook_signed(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    webhook = await register(merchant, receiver, "/portal-test", "PAYMENT_LINK_INBOUND")
    webhook_id = webhook["webhookId"]
    async with open_portal(merchant, language="en") as client:
        own = await client.get(f"/portal/webhooks/{webhook_id}")
        sent = await client.post(
            f"/portal/webhooks/{webhook_id}/test-event",
            data={"csrf_token": csrf_token(own), "variant": "REFUNDED"},
        )
        told = (await client.get(sent.headers["location"])).text
    assert '<label for="variant">Variant</label>' in own.text
    assert "<option>PARTIALLY_REFUNDED</option>" in own.text
    assert sent.status_code == 303
    found = re.fullmatch(
        rf"/portal/webhooks/{webhook_id}\?done=test_sent&event=(evt_[0-9a-f]{{32}})",
        sent.headers["location"],
    )
    assert found, sent.headers["location"]
    assert (
        f'role="status">Test event {found.group(1)} sent to your active PAYMENT_LINK_INBOUND '
        "webhooks." in told
    )
    (request,) = await receiver.wait_for("/portal-test", 1)
    payload = StandardWebhook(webhook["secret"]).verify(request.body, request.headers)
    assert payload["status"] == "REFUNDED" and payload["refund"]["status"] == "SUCCEEDED"
    assert request.headers["webhook-id"] == found.group(1)


async def test_a_test_event_takes_only_a_variant_of_its_type(service: RunningService) -> None:
    merchant = await service.merchant()
    outbound = await made(merchant, "https://hooks.example.com/out")
    link = await made(merchant, "https://hooks.example.com/link", "PAYMENT_LINK_INBOUND")
    async with open_portal(merchant, language="en") as client:
        own = await client.get(f"/portal/webhooks/{outbound}")
        token = csrf_token(own)
        wrong = await client.post(
            f"/portal/webhooks/{link}/test-event", data={"csrf_token": token, "variant": "REFUND"}
        )
        none_taken = await client.post(
            f"/portal/webhooks/{outbound}/test-event", data={"csrf_token": token, "variant": "PAID"}
        )
    assert 'name="variant"' not in own.text and "Send test event" in own.text
    assert wrong.status_code == none_taken.status_code == 400
    assert "The request could not be done" in wrong.text


async def test_an_inactive_webhook_is_told_to_be_activated_before_a_test(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    webhook_id = await made(merchant, "https://hooks.example.com/off")
    await merchant.put(f"/webhook/v1/{webhook_id}", json={"isActive": False})
    async with open_portal(merchant, language="en") as client:
        own = (await client.get(f"/portal/webhooks/{webhook_id}")).text
    assert "Activate this webhook to send it a test event." in own
    assert "Send test event" not in own


async def test_production_offers_no_test_event_and_refuses_one(
    production_service: RunningService,
) -> None:
    merchant = await production_service.merchant()
    webhook_id = await made(merchant, "https://hooks.example.com/prod")
    async with open_portal(merchant, language="en") as client:
        own = await client.get(f"/portal/webhooks/{webhook_id}")
        sent = await client.post(
            f"/portal/webhooks/{webhook_id}/test-event", data={"csrf_token": csrf_token(own)}
        )
    assert own.status_code == 200
    assert "Send test event" not in own.text and "test-event" not in own.text
    assert "Rotate secret" in own.text
    assert sent.status_code == 403


async def test_a_read_only_session_has_no_action_and_every_one_is_refused(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    webhook_id = await made(merchant, "https://hooks.example.com/read-only", "PIX_QR_INBOUND")
    before = (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"]
    async with open_portal(merchant, language="en") as writer:
        # A token of the same customer's writable session: the read-only one's page has none.
        token = csrf_token(await writer.get("/portal/webhooks"))
    async with open_portal(merchant, language="en", readOnly=True) as client:
        listed = (await client.get("/portal/webhooks")).text
        own = (await client.get(f"/portal/webhooks/{webhook_id}")).text
        pages_refused = [
            await client.get(f"/portal/webhooks/{path}")
            for path in ("new", f"{webhook_id}/rotate", f"{webhook_id}/delete")
        ]
        fields = {
            "new": {"target_url": "https://hooks.example.com/x", "event_type": "PIX_OUTBOUND"},
            f"{webhook_id}/edit": {
                "target_url": "https://hooks.example.com/changed",
                "event_type": "PIX_OUTBOUND",
            },
            f"{webhook_id}/secret": {},
            f"{webhook_id}/rotate": {},
            f"{webhook_id}/test-event": {},
            f"{webhook_id}/delete": {},
        }
        posted = [
            await client.post(f"/portal/webhooks/{path}", data={"csrf_token": token, **data})
            for path, data in fields.items()
        ]
    assert "Create webhook" not in listed and "/portal/webhooks/new" not in listed
    for action in ("Send test event", "Reveal secret", "Rotate secret", "Delete webhook", "Save"):
        assert action not in own
    assert "<form" not in own.split("</header>", 1)[1]
    assert "https://hooks.example.com/read-only" in own and "PIX_QR_INBOUND" in own
    assert [page.status_code for page in pages_refused] == [403, 403, 403]
    assert [answer.status_code for answer in posted] == [403] * len(fields)
    assert all("This session is read-only" in answer.text for answer in posted)
    after = await merchant.get(f"/webhook/v1/{webhook_id}")
    assert after.json()["targetUrl"] == "https://hooks.example.com/read-only"
    assert (await merchant.get(f"/webhook/v1/{webhook_id}/secret")).json()["secret"] == before
    assert (await merchant.get("/webhook/v1/list")).json()["totalElements"] == 1


async def test_another_customers_webhook_is_never_shown_or_changed(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    other = await service.merchant()
    theirs = await made(other, "https://other.example.com/theirs", "PAYMENT_LINK_INBOUND")
    secret = (await other.get(f"/webhook/v1/{theirs}/secret")).json()["secret"]
    async with open_portal(merchant, language="en") as client:
        token = csrf_token(await client.get("/portal/webhooks"))
        shown = [
            await client.get(f"/portal/webhooks/{path}")
            for path in (f"{theirs}", f"{theirs}/rotate", f"{theirs}/delete")
        ]
        posted = [
            await client.post(f"/portal/webhooks/{theirs}/{action}", data={"csrf_token": token})
            for action in ("secret", "rotate", "test-event", "delete")
        ]
        edited = await client.post(
            f"/portal/webhooks/{theirs}/edit",
            data={
                "csrf_token": token,
                "target_url": "https://mine.example.com/x",
                "event_type": "PIX_OUTBOUND",
            },
        )
    for answer in [*shown, *posted, edited]:
        assert answer.status_code == 404, answer.text
        assert "other.example.com" not in answer.text and secret not in answer.text
    kept = (await other.get(f"/webhook/v1/{theirs}")).json()
    assert kept["targetUrl"] == "https://other.example.com/theirs" and kept["isActive"] is True
    assert (await other.get(f"/webhook/v1/{theirs}/secret")).json()["secret"] == secret
