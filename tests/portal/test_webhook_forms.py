"""Creating and editing a webhook in the portal: the API's rules (its schemas, the target URL's
check), each problem shown beside its field in the page's language, what was typed kept, and
nothing saved until every field passes."""

from __future__ import annotations

import re

from tests.support.portal import csrf_token, open_portal
from tests.support.service import Merchant, RunningService, serving

NEW = "/portal/webhooks/new"


def problem(page: str, field: str) -> str:
    """The text beside a field, tags dropped."""
    found = re.search(rf'<p class="field-problem" id="{field}-problem">(.*?)</p>', page, re.S)
    assert found, page
    return re.sub(r"<[^>]+>", "", found.group(1))


async def listed(merchant: Merchant) -> list[dict[str, object]]:
    return list((await merchant.get("/webhook/v1/list")).json()["content"])


async def test_a_webhook_is_created_from_its_form(service: RunningService) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, language="en") as client:
        webhooks = (await client.get("/portal/webhooks")).text
        form = await client.get(NEW)
        created = await client.post(
            NEW,
            data={
                "csrf_token": csrf_token(form),
                "target_url": "  https://hooks.example.com/portal-made  ",
                "event_type": "CARD_CHARGEBACK",
            },
        )
        own = (await client.get(created.headers["location"])).text
    assert '<a class="button primary" href="/portal/webhooks/new">Create webhook</a>' in webhooks
    for label in ("Target URL", "Event type", "Active: deliver events to it"):
        assert f">{label}</label>" in form.text
    assert len(re.findall(r"<option>[A-Z_]+</option>", form.text)) == 7
    assert '<button class="button primary" type="submit">Create webhook</button>' in form.text
    (webhook,) = await listed(merchant)
    # Spaces around a pasted address are dropped; the box left unticked makes it inactive.
    assert webhook["targetUrl"] == "https://hooks.example.com/portal-made"
    assert (webhook["eventType"], webhook["isActive"], webhook["partnerId"]) == (
        "CARD_CHARGEBACK",
        False,
        None,
    )
    assert created.status_code == 303
    assert created.headers["location"] == f"/portal/webhooks/{webhook['webhookId']}?done=created"
    assert 'role="status">Webhook created. Reveal its signing secret below' in own
    assert "whsec_" not in own


async def test_a_private_address_is_refused_beside_its_field(service: RunningService) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant) as client:
        form = await client.get(NEW)
        refused = await client.post(
            NEW,
            data={
                "csrf_token": csrf_token(form),
                "target_url": "https://10.1.2.3/webhooks",
                "event_type": "PIX_OUTBOUND",
                "is_active": "on",
            },
        )
    assert refused.status_code == 400
    assert problem(refused.text, "target_url") == (
        "Esta URL não pode receber webhooks: host 10.1.2.3 is not a public address; webhooks are "
        "only sent to public hosts (see TUCANO_WEBHOOK_ALLOWED_NETWORKS for local development)"
    )
    # The reason is the webhooks service's own words, marked as English on a Portuguese page.
    assert '<span lang="en">host 10.1.2.3' in refused.text
    assert 'aria-describedby="target_url-hint target_url-problem" aria-invalid="true"' in (
        refused.text
    )
    assert 'value="https://10.1.2.3/webhooks"' in refused.text
    assert "<option selected>PIX_OUTBOUND</option>" in refused.text
    assert "O webhook não foi salvo" in refused.text
    assert await listed(merchant) == []


async def test_missing_fields_are_named_and_nothing_is_saved(service: RunningService) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, language="en") as client:
        token = csrf_token(await client.get(NEW))
        empty = await client.post(NEW, data={"csrf_token": token})
        unknown = await client.post(
            NEW,
            data={
                "csrf_token": token,
                "target_url": "not a url",
                "event_type": "PIX_ANYTHING",
            },
        )
    assert empty.status_code == unknown.status_code == 400
    assert problem(empty.text, "target_url") == "Enter the target URL."
    assert problem(empty.text, "event_type") == "Choose one of the event types."
    assert problem(unknown.text, "target_url") == (
        "This URL cannot receive webhooks: must be ASCII without spaces (write international "
        "domain names as xn--)"
    )
    assert problem(unknown.text, "event_type") == "Choose one of the event types."
    assert await listed(merchant) == []


async def test_production_refuses_plain_http(production_service: RunningService) -> None:
    merchant = await production_service.merchant()
    async with open_portal(merchant, language="en") as client:
        form = await client.get(NEW)
        refused = await client.post(
            NEW,
            data={
                "csrf_token": csrf_token(form),
                "target_url": "http://hooks.example.com/plain",
                "event_type": "PIX_OUTBOUND",
            },
        )
    assert "A public https address.</p>" in form.text
    assert refused.status_code == 400
    assert problem(refused.text, "target_url") == (
        "This URL cannot receive webhooks: must use https (plain http is accepted only in the "
        "sandbox)"
    )
    assert await listed(merchant) == []


async def test_one_webhook_past_the_limit_is_refused_with_why(service: RunningService) -> None:
    settings = service.settings.model_copy(update={"max_webhooks_per_customer": 1})
    async with serving(settings, service.database) as limited:
        merchant = await limited.merchant()
        await merchant.post(
            "/webhook/v1/create",
            json={"targetUrl": "https://hooks.example.com/one", "eventType": "PIX_OUTBOUND"},
        )
        async with open_portal(merchant, language="en") as client:
            form = await client.get(NEW)
            refused = await client.post(
                NEW,
                data={
                    "csrf_token": csrf_token(form),
                    "target_url": "https://hooks.example.com/two",
                    "event_type": "PIX_OUTBOUND",
                },
            )
        assert refused.status_code == 409
        assert (
            "This customer already has the most webhooks allowed (1): delete one before "
            "creating another." in refused.text
        )
        assert 'value="https://hooks.example.com/two"' in refused.text
        assert len(await listed(merchant)) == 1


async def test_a_webhook_is_edited_from_its_page(service: RunningService) -> None:
    merchant = await service.merchant()
    created = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": "https://hooks.example.com/before", "eventType": "PIX_OUTBOUND"},
    )
    webhook_id = created.json()["webhookId"]
    async with open_portal(merchant, language="en") as client:
        own = await client.get(f"/portal/webhooks/{webhook_id}")
        token = csrf_token(own)
        refused = await client.post(
            f"/portal/webhooks/{webhook_id}/edit",
            data={
                "csrf_token": token,
                "target_url": "https://user:pw@hooks.example.com/after",
                "event_type": "PIX_QR_INBOUND",
                "is_active": "on",
            },
        )
        unchanged = (await merchant.get(f"/webhook/v1/{webhook_id}")).json()
        saved = await client.post(
            f"/portal/webhooks/{webhook_id}/edit",
            data={
                "csrf_token": token,
                "target_url": "https://hooks.example.com/after",
                "event_type": "PIX_QR_INBOUND",
            },
        )
        told = (await client.get(saved.headers["location"])).text
    assert f'action="/portal/webhooks/{webhook_id}/edit"' in own.text
    assert 'value="https://hooks.example.com/before"' in own.text
    assert "<option selected>PIX_OUTBOUND</option>" in own.text
    assert refused.status_code == 400
    assert problem(refused.text, "target_url") == (
        "This URL cannot receive webhooks: must not contain credentials (user:password@)"
    )
    assert unchanged["targetUrl"] == "https://hooks.example.com/before"
    assert saved.status_code == 303
    assert saved.headers["location"] == f"/portal/webhooks/{webhook_id}?done=updated"
    assert 'role="status">Changes saved.' in told
    after = (await merchant.get(f"/webhook/v1/{webhook_id}")).json()
    assert (after["targetUrl"], after["eventType"], after["isActive"]) == (
        "https://hooks.example.com/after",
        "PIX_QR_INBOUND",
        False,
    )


async def test_an_address_left_as_it_was_is_not_checked_again(
    service: RunningService, delivery_service: RunningService
) -> None:
    # Registered where loopback receivers are allowed; edited where they are not.
    allowing = await delivery_service.merchant()
    created = await allowing.post(
        "/webhook/v1/create",
        json={"targetUrl": "http://127.0.0.1:9/hook", "eventType": "PIX_OUTBOUND"},
    )
    webhook_id = created.json()["webhookId"]
    merchant = Merchant(service, allowing.customer_id, allowing.token)
    async with open_portal(merchant, language="en") as client:
        token = csrf_token(await client.get(f"/portal/webhooks/{webhook_id}"))
        kept = await client.post(
            f"/portal/webhooks/{webhook_id}/edit",
            data={
                "csrf_token": token,
                "target_url": "http://127.0.0.1:9/hook",
                "event_type": "CARD_PAYMENT_INBOUND",
                "is_active": "on",
            },
        )
        moved = await client.post(
            f"/portal/webhooks/{webhook_id}/edit",
            data={
                "csrf_token": token,
                "target_url": "http://127.0.0.1:10/hook",
                "event_type": "CARD_PAYMENT_INBOUND",
                "is_active": "on",
            },
        )
    assert kept.status_code == 303
    assert moved.status_code == 400
    assert "host 127.0.0.1 is not a public address" in problem(moved.text, "target_url")
    after = (await allowing.get(f"/webhook/v1/{webhook_id}")).json()
    assert (after["targetUrl"], after["eventType"]) == (
        "http://127.0.0.1:9/hook",
        "CARD_PAYMENT_INBOUND",
    )


async def test_a_long_target_url_is_taken_as_the_api_takes_it(service: RunningService) -> None:
    merchant = await service.merchant()
    long_url = "https://hooks.example.com/" + "a" * 1000  # beyond a portal field's usual 200
    async with open_portal(merchant, language="en") as client:
        created = await client.post(
            NEW,
            data={
                "csrf_token": csrf_token(await client.get(NEW)),
                "target_url": long_url,
                "event_type": "PIX_OUTBOUND",
            },
        )
    assert created.status_code == 303, created.text
    assert [webhook["targetUrl"] for webhook in await listed(merchant)] == [long_url]
