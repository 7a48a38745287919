"""The event catalogue read from an OpenAPI document: each webhook's description, its schema
with references written out, and its examples."""

from __future__ import annotations

from typing import Any

from tucano.core import json_codec
from tucano.portal.event_catalogue import catalogue, resolved

COMPONENTS: dict[str, Any] = {
    "Party": {"type": "object", "properties": {"name": {"type": "string"}}},
    "Node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}}},
}


def test_references_are_written_out_and_a_recursive_one_stops_where_it_recurs() -> None:
    schema = {
        "properties": {
            "payer": {"$ref": "#/components/schemas/Party", "description": "Who paid."},
            "chain": {"anyOf": [{"$ref": "#/components/schemas/Node"}, {"type": "null"}]},
            "elsewhere": {"$ref": "https://example.com/schema"},
        }
    }
    shown = resolved(schema, COMPONENTS)["properties"]
    assert shown["payer"] == {**COMPONENTS["Party"], "description": "Who paid."}
    node = shown["chain"]["anyOf"][0]
    assert node["properties"]["next"] == {"$ref": "#/components/schemas/Node"}
    assert shown["elsewhere"] == {"$ref": "https://example.com/schema"}


def test_each_webhook_of_the_document_is_an_entry() -> None:
    document = {
        "components": {"schemas": COMPONENTS},
        "webhooks": {
            "PARTY_MADE": {
                "post": {
                    "summary": "PARTY_MADE: A party was made.",
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/Party"},
                                "examples": {
                                    "small": {"summary": "A small one.", "value": {"name": "a"}},
                                    "big": {"value": {"name": "<b>"}},
                                },
                            }
                        }
                    },
                }
            }
        },
    }
    (entry,) = catalogue(document)
    assert entry.name == "PARTY_MADE" and entry.description == "A party was made."
    assert json_codec.loads(entry.schema) == COMPONENTS["Party"]
    assert entry.schema.startswith('{\n  "type": "object"')
    assert [(s.name, s.summary) for s in entry.samples] == [("small", "A small one."), ("big", "")]
    assert entry.samples[1].json == '{\n  "name": "<b>"\n}'
    assert catalogue({}) == []


def test_a_descriptions_code_spans_are_marked() -> None:
    entry = catalogue(
        {"webhooks": {"X": {"post": {"summary": "X: with `refund.status` FAILED, ` alone"}}}}
    )[0]
    assert entry.description_parts == [("with `refund.status` FAILED, ` alone", False)]
    entry = catalogue({"webhooks": {"X": {"post": {"summary": "X: with `refund.status` set"}}}})[0]
    assert entry.description_parts == [("with ", False), ("refund.status", True), (" set", False)]
