"""The portal's deliveries: every attempt (from real deliveries to a loopback receiver) with
its event, target, status and answer, filtered; the week's health as a chart with its numbers
in words; an event's payload and attempts; Redeliver and Recover, never in a read-only session
and never on another customer's webhooks or events; bad input told on the page."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.support.deliveries import register, results_for
from tests.support.portal import csrf_token, open_portal
from tests.support.receivers import Receiver, always
from tests.support.service import Merchant, RunningService
from tucano.brazil.brasilia_time import BRASILIA
from tucano.core import json_codec
from tucano.portal import delivery_views


def rows_of(page: str) -> list[str]:
    """The attempts table's rows, as their text."""
    found = re.findall(r'<tr data-result-id="\d+"[^>]*>(.*?)</tr>', page, re.S)
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in found]


def alert_of(page: str) -> str:
    found = re.search(r'role="alert"><p>(.*?)</p>', page, re.S)
    assert found, page
    return html.unescape(found.group(1))


def status_of(page: str) -> str:
    found = re.search(r'role="status">(.*?)</p>', page, re.S)
    assert found, page
    return html.unescape(found.group(1))


def pre_of(page: str, marker: str) -> str:
    found = re.search(rf"<pre[^>]*{marker}[^>]*>(.*?)</pre>", page, re.S)
    assert found, page
    return html.unescape(found.group(1))


def field(moment: datetime) -> str:
    return moment.astimezone(BRASILIA).strftime("%Y-%m-%dT%H:%M")


async def send_test_event(merchant: Merchant, event_type: str = "PIX_OUTBOUND") -> str:
    sent = await merchant.post("/webhook/v1/test-events", json={"eventType": event_type})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["eventId"])


async def test_a_failed_delivery_is_listed_with_its_event_and_its_answer(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    other = await delivery_service.merchant()
    receiver.behaviours["/down"] = always(500, "<b>down</b> & out")
    down = await register(merchant, receiver, "/down", "PIX_OUTBOUND")
    ok = await register(merchant, receiver, "/ok", "CARD_CHARGEBACK")
    await register(other, receiver, "/theirs", "PIX_OUTBOUND")
    event_id = await send_test_event(merchant)
    await send_test_event(merchant, "CARD_CHARGEBACK")
    their_event = await send_test_event(other)
    # The first attempt and both retries (TUCANO_RETRY_SCHEDULE is 300ms,600ms here).
    await results_for(merchant, 1, webhookId=down["webhookId"], status="EXHAUSTED")
    await results_for(merchant, 1, webhookId=ok["webhookId"])
    await results_for(other, 1)
    async with open_portal(merchant, language="en") as client:
        listed = (await client.get("/portal/deliveries")).text
        exhausted = (await client.get("/portal/deliveries", params={"status": "EXHAUSTED"})).text
        of_down = (
            await client.get("/portal/deliveries", params={"webhook": down["webhookId"]})
        ).text
        chargebacks = (await client.get("/portal/deliveries?type=CARD_CHARGEBACK")).text
        event = await client.get(f"/portal/deliveries/events/{event_id}")
        theirs = await client.get(f"/portal/deliveries/events/{their_event}")
        missing = await client.get("/portal/deliveries/events/evt_nothing")

    rows = rows_of(listed)
    assert len(rows) == 4
    newest_failure = next(row for row in rows if "retries exhausted" in row)
    assert newest_failure.startswith(f"PIX_OUTBOUND {event_id} {receiver.url('/down')} 3 ")
    assert " failed; retries exhausted 500 " in newest_failure
    assert re.search(r" \d+ ms \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", newest_failure)
    assert receiver.url("/theirs") not in listed
    assert "Delivery attempts, newest first (4 in all)" in listed
    assert [row.split()[3] for row in rows_of(exhausted)] == ["3"]
    assert len(rows_of(of_down)) == 3
    assert all("CARD_CHARGEBACK" in row for row in rows_of(chargebacks))
    assert len(rows_of(chargebacks)) == 1

    assert event.status_code == 200
    page = event.text
    assert "<h1>PIX_OUTBOUND event</h1>" in page
    # The payload as every delivery sent it, indented for people.
    sent = receiver.at("/down")[0]
    payload = pre_of(page, "data-payload")
    assert json_codec.loads(payload) == json_codec.loads(sent.body)
    assert '\n  "transferId": ' in payload
    assert page.count('<article class="panel attempt"') == 3
    assert "Attempt 3 to " + receiver.url("/down") in page
    # The receiver's answer is shown as text, never as markup.
    assert "&lt;b&gt;down&lt;/b&gt; &amp; out" in page and "<b>down</b>" not in page
    assert theirs.status_code == 404 and "Not found" in theirs.text
    assert missing.status_code == 404


async def test_the_weeks_health_is_drawn_per_day_with_its_numbers_in_words(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    receiver.behaviours["/sick"] = always(503)
    sick = await register(merchant, receiver, "/sick", "PIX_OUTBOUND")
    well = await register(merchant, receiver, "/well", "CARD_CHARGEBACK")
    await send_test_event(merchant)
    await send_test_event(merchant, "CARD_CHARGEBACK")
    await results_for(merchant, 1, webhookId=sick["webhookId"], status="EXHAUSTED")
    await results_for(merchant, 1, webhookId=well["webhookId"])
    async with open_portal(merchant, language="en") as client:
        every = (await client.get("/portal/deliveries")).text
        one = (await client.get(f"/portal/deliveries?webhook={sick['webhookId']}")).text
        unknown = (await client.get("/portal/deliveries?webhook=999999999")).text
    assert "Attempts: 4 · succeeded: 1 · failed: 3" in every
    assert "Attempts: 3 · succeeded: 0 · failed: 3" in one
    assert f"Attempts to the webhook {receiver.url('/sick')}." in one
    assert "Attempts to the webhook #999999999." in unknown
    assert "Attempts: 0 · succeeded: 0 · failed: 0" in unknown
    today = datetime.now(UTC).astimezone(BRASILIA).date()
    label = f"{today:%b} {today.day}"
    assert f"{label}: 1 succeeded, 3 failed." in every  # the last day of the chart's description
    assert re.search(r'<svg class="chart"[^>]*role="img" aria-labelledby="health-title', every)
    assert every.count('fill="#1e7b45"/>') == 1 and every.count('fill="#b3261e"/>') == 1
    assert f"<tr><td>{label}</td><td>1</td><td>3</td></tr>" in every
    assert "style=" not in every


async def test_an_event_is_redelivered_from_its_page(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    other = await delivery_service.merchant()
    hook = await register(merchant, receiver, "/again", "PIX_OUTBOUND")
    other_type = await register(merchant, receiver, "/other-type", "CARD_CHARGEBACK")
    theirs = await register(other, receiver, "/their-hook", "PIX_OUTBOUND")
    event_id = await send_test_event(merchant)
    their_event = await send_test_event(other)
    await results_for(merchant, 1, webhookId=hook["webhookId"])
    async with open_portal(merchant, language="en") as client:
        page = await client.get(f"/portal/deliveries/events/{event_id}")
        assert f'<option value="{hook["webhookId"]}" selected>' in page.text
        assert f'value="{other_type["webhookId"]}"' not in page.text  # another event type
        token = csrf_token(page)
        path = f"/portal/deliveries/events/{event_id}/redeliver"
        done = await client.post(path, data={"csrf_token": token, "webhook": hook["webhookId"]})
        assert done.status_code == 303
        assert done.headers["location"] == f"/portal/deliveries/events/{event_id}?done=redelivered"
        shown = (await client.get(done.headers["location"])).text
        assert status_of(shown) == "Event queued for delivery again."
        await receiver.wait_for("/again", 2)
        assert [r.headers["webhook-id"] for r in receiver.at("/again")] == [event_id] * 2

        bad = await client.post(path, data={"csrf_token": token, "webhook": "abc"})
        mismatch = await client.post(
            path, data={"csrf_token": token, "webhook": other_type["webhookId"]}
        )
        to_theirs = await client.post(
            path, data={"csrf_token": token, "webhook": theirs["webhookId"]}
        )
        their_own = await client.post(
            f"/portal/deliveries/events/{their_event}/redeliver",
            data={"csrf_token": token, "webhook": hook["webhookId"]},
        )
        await merchant.put(f"/webhook/v1/{hook['webhookId']}", json={"isActive": False})
        inactive = await client.post(path, data={"csrf_token": token, "webhook": hook["webhookId"]})
    assert bad.status_code == 400 and alert_of(bad.text) == "Choose a webhook from the list."
    assert mismatch.status_code == 409
    assert alert_of(mismatch.text).startswith("This webhook receives another event type.")
    assert inactive.status_code == 409
    assert alert_of(inactive.text).startswith("This webhook is inactive")
    assert to_theirs.status_code == 404 and their_own.status_code == 404
    assert len(receiver.at("/again")) == 2 and receiver.at("/their-hook") == [
        r for r in receiver.at("/their-hook") if r.headers["webhook-id"] == their_event
    ]
    assert len(receiver.at("/their-hook")) == 1


async def test_failed_events_are_counted_then_recovered(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    receiver.behaviours["/recover"] = always(500)
    hook = await register(merchant, receiver, "/recover", "PIX_OUTBOUND")
    before = datetime.now(UTC) - timedelta(minutes=2)
    first, second = await send_test_event(merchant), await send_test_event(merchant)
    await results_for(merchant, 2, webhookId=hook["webhookId"], status="EXHAUSTED")
    receiver.behaviours["/recover"] = always(200)
    async with open_portal(merchant, language="en") as client:
        listed = await client.get("/portal/deliveries")
        assert 'action="/portal/deliveries/recover"' in listed.text
        asked = await client.get(
            "/portal/deliveries/recover",
            params={"webhook": hook["webhookId"], "since": field(before), "until": ""},
        )
        assert asked.status_code == 200
        assert '<h2 id="confirm-heading">Recover 2 events?</h2>' in asked.text
        assert ">Recover 2 events</button>" in asked.text
        form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', asked.text))
        assert set(form) == {"csrf_token", "webhook", "since", "until"}
        done = await client.post("/portal/deliveries/recover", data=form)
        assert done.status_code == 303
        assert done.headers["location"] == (
            f"/portal/deliveries?webhook={hook['webhookId']}&done=recovered&count=2"
        )
        shown = (await client.get(done.headers["location"])).text
        assert status_of(shown) == "2 events queued for delivery again."
        await receiver.wait_for("/recover", 8)
        # Each event delivered once more, and a second recovery finds nothing.
        delivered = [r.headers["webhook-id"] for r in receiver.at("/recover")]
        assert sorted(delivered) == sorted([first] * 4 + [second] * 4)
        again = await client.post("/portal/deliveries/recover", data=form)
        assert again.headers["location"].endswith("&done=recovered&count=0")


async def recovery_answer(client: httpx.AsyncClient, **params: object) -> httpx.Response:
    return await client.get("/portal/deliveries/recover", params=params)


async def test_a_recovery_asked_wrongly_is_told_so_and_queues_nothing(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    other = await delivery_service.merchant()
    hook = await register(merchant, receiver, "/wrongly", "PIX_OUTBOUND")
    theirs = await register(other, receiver, "/theirs-recovered", "PIX_OUTBOUND")
    now = datetime.now(UTC)
    mine = hook["webhookId"]
    async with open_portal(merchant, language="en") as client:
        first = (await client.get(f"/portal/deliveries/recover?webhook={mine}")).text
        reversed_ = await recovery_answer(
            client, webhook=mine, since=field(now), until=field(now - timedelta(hours=1))
        )
        too_long = await recovery_answer(
            client, webhook=mine, since=field(now - timedelta(days=15)), until=field(now)
        )
        garbled = await recovery_answer(client, webhook=mine, since="yesterday")
        no_start = await recovery_answer(client, webhook=mine, since="", until=field(now))
        no_webhook = await recovery_answer(client, webhook="x", since=field(now))
        their_hook = await recovery_answer(client, webhook=theirs["webhookId"], since=field(now))
        nothing = await recovery_answer(client, webhook=mine, since=field(now))
        await merchant.put(f"/webhook/v1/{mine}", json={"isActive": False})
        inactive = await recovery_answer(client, webhook=mine, since=field(now))
        token = csrf_token(inactive)
        posted = await client.post(
            "/portal/deliveries/recover",
            data={"csrf_token": token, "webhook": mine, "since": field(now), "until": ""},
        )
        posted_theirs = await client.post(
            "/portal/deliveries/recover",
            data={"csrf_token": token, "webhook": theirs["webhookId"], "since": field(now)},
        )
    # The form starts a day ago, up to whenever it is sent, the webhook chosen.
    assert f'<option value="{mine}" selected>' in first
    assert (
        f'name="since" type="datetime-local" step="1" value="{field(now - timedelta(days=1))[:13]}'
        in first
    )
    assert 'name="until" type="datetime-local" step="1" value=""' in first  # now, when sent
    for answer, said in (
        (reversed_, "The start must not be after the end."),
        (too_long, "A range may span at most 14 days; recover a longer outage in several ranges."),
        (garbled, "Give the date and time as the field asks."),
        (no_start, "Give the start of the range."),
        (no_webhook, "Choose a webhook from the list."),
    ):
        assert answer.status_code == 400, answer.text
        assert alert_of(answer.text) == said
        assert 'name="since"' in answer.text  # the form again, to put it right
    assert their_hook.status_code == 404 and posted_theirs.status_code == 404
    assert "No event to recover in this range." in nothing.text and "Recover 0" not in nothing.text
    assert (
        "This webhook is inactive" in inactive.text
        and "</button>" not in inactive.text.split('id="confirm-heading"')[1].split("</section>")[0]
    )
    assert posted.status_code == 409 and alert_of(posted.text).startswith(
        "This webhook is inactive"
    )


async def test_a_read_only_session_sees_deliveries_and_can_change_nothing(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    hook = await register(merchant, receiver, "/read-only", "PIX_OUTBOUND")
    event_id = await send_test_event(merchant)
    await results_for(merchant, 1, webhookId=hook["webhookId"])
    async with open_portal(merchant, language="en") as writer:
        token = csrf_token(await writer.get(f"/portal/deliveries/events/{event_id}"))
    async with open_portal(merchant, language="en", readOnly=True) as client:
        listed = await client.get("/portal/deliveries")
        event = await client.get(f"/portal/deliveries/events/{event_id}")
        recover_page = await recovery_answer(client, webhook=hook["webhookId"])
        reader_token = csrf_token(listed)  # the sign-out form's
        for csrf in (token, reader_token):
            redelivered = await client.post(
                f"/portal/deliveries/events/{event_id}/redeliver",
                data={"csrf_token": csrf, "webhook": hook["webhookId"]},
            )
            recovered = await client.post(
                "/portal/deliveries/recover",
                data={
                    "csrf_token": csrf,
                    "webhook": hook["webhookId"],
                    "since": "2026-01-01T00:00",
                },
            )
            assert redelivered.status_code == 403 and recovered.status_code == 403
    assert listed.status_code == 200 and len(rows_of(listed.text)) == 1
    assert "/portal/deliveries/recover" not in listed.text and ">Recover<" not in listed.text
    assert event.status_code == 200 and "Redeliver" not in event.text
    assert "/redeliver" not in event.text
    assert recover_page.status_code == 403
    assert len(receiver.at("/read-only")) == 1


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("from=2026-13-01", "Give each day as a date (YYYY-MM-DD)."),
        ("from=2026-12-08&to=2026-12-07", "The first day must not be after the last."),
        ("type=NOT_A_TYPE", "Choose an event type from the list."),
        ("status=LOST", "Choose a status from the list."),
        ("webhook=-1", "Choose a webhook from the list."),
    ],
)
async def test_a_filter_given_wrongly_is_told_so(
    service: RunningService, query: str, said: str
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant, language="en") as client:
        answer = await client.get(f"/portal/deliveries?{query}")
    assert answer.status_code == 400
    assert alert_of(answer.text) == said
    assert '<table class="deliveries"' not in answer.text


async def test_the_attempts_are_listed_a_page_at_a_time_with_their_filters(
    delivery_service: RunningService, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_views, "RESULTS_PER_PAGE", 2)
    merchant = await delivery_service.merchant()
    hook = await register(merchant, receiver, "/paged", "PIX_OUTBOUND")
    for _ in range(3):
        await send_test_event(merchant)
    await results_for(merchant, 3, webhookId=hook["webhookId"])
    today = datetime.now(UTC).astimezone(BRASILIA).date().isoformat()
    async with open_portal(merchant) as client:
        first = (await client.get(f"/portal/deliveries?status=SUCCESS&from={today}")).text
        second = (await client.get(f"/portal/deliveries?status=SUCCESS&from={today}&page=1")).text
        empty = (await client.get("/portal/deliveries?status=EXHAUSTED")).text
    assert len(rows_of(first)) == 2 and len(rows_of(second)) == 1
    assert "Página 1 de 2" in first
    assert f'href="/portal/deliveries?status=SUCCESS&amp;from={today}&amp;page=1">Próxima' in first
    assert "Nenhuma tentativa de entrega encontrada." in empty
    assert '<option value="SUCCESS" selected>sucesso</option>' in first
