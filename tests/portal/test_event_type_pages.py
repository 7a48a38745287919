"""The portal's event catalogue: the seven event types with their descriptions, schemas and
samples, as the application's own OpenAPI document has them, shown as text."""

from __future__ import annotations

import html
import re

from tests.support.portal import open_portal
from tests.support.service import RunningService
from tucano.core import json_codec
from tucano.events.types import EventType


def sections_of(page: str) -> dict[str, str]:
    return dict(
        re.findall(
            r'<section class="panel event-type-entry" id="(\w+)".*?>(.*?)</section>', page, re.S
        )
    )


def pres_of(section: str) -> list[str]:
    return [html.unescape(found) for found in re.findall(r"<pre[^>]*>(.*?)</pre>", section, re.S)]


async def test_every_event_type_with_its_schema_and_samples(service: RunningService) -> None:
    merchant = await service.merchant()
    document = service.app.openapi()
    async with open_portal(merchant, language="en") as client:
        page = await client.get("/portal/event-types")
    assert page.status_code == 200
    assert 'aria-current="page">Event types</a>' in page.text
    sections = sections_of(page.text)
    assert list(sections) == [event_type.value for event_type in EventType]
    for name, section in sections.items():
        operation = document["webhooks"][name]["post"]
        described = operation["summary"].removeprefix(f"{name}: ")
        shown_description = re.search(r'<p lang="en">(.*?)</p>', section, re.S)
        assert shown_description is not None
        assert html.unescape(re.sub("</?code>", "`", shown_description.group(1))) == described
        body = operation["requestBody"]["content"]["application/json"]
        schema, *samples = pres_of(section)
        shown = json_codec.loads(schema)
        # Written out whole: its references to other schemas replaced by them.
        assert '"$ref"' not in schema
        assert set(shown["properties"]) == set(
            document["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[1]][
                "properties"
            ]
        )
        assert [json_codec.loads(sample) for sample in samples] == [
            json_codec.loads(json_codec.dumps(example["value"]))
            for example in body["examples"].values()
        ]
        assert section.count("<details") == 1 + len(body["examples"])
    link = sections["PAYMENT_LINK_INBOUND"]
    assert "Sample: PAID</summary>" in link and "Sample: REFUND_FAILED</summary>" in link
    # Shown as text: the JSON's quotes are escaped in the markup.
    assert "&#34;paymentLinkUuid&#34;: " in link


async def test_in_portuguese_the_page_says_the_catalogue_is_in_english(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    async with open_portal(merchant) as client:
        page = (await client.get("/portal/event-types")).text
    assert "<h1>Tipos de evento</h1>" in page
    assert "Descrições, esquemas e exemplos em inglês" in page
    assert "Esquema JSON</summary>" in page and len(sections_of(page)) == 7
