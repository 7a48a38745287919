"""The event catalogue as the portal shows it, read from the application's own OpenAPI
document (its `webhooks` section): what the integration's code is generated from is what a
person reads, so the two never disagree. Each schema has its references written out in place,
so that it reads on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tucano.core import json_codec

_COMPONENT = "#/components/schemas/"


@dataclass(frozen=True)
class Sample:
    name: str
    summary: str
    json: str  # pretty


@dataclass(frozen=True)
class EventTypeEntry:
    name: str
    description: str
    schema: str  # pretty JSON
    samples: list[Sample]

    @property
    def description_parts(self) -> list[tuple[str, bool]]:
        """The description's text and its `code` spans (Markdown's), each marked as such."""
        parts = self.description.split("`")
        if len(parts) % 2 == 0:  # an unmatched backtick: plain text
            return [(self.description, False)]
        return [(part, n % 2 == 1) for n, part in enumerate(parts) if part]


def pretty(value: Any) -> str:
    return json_codec.dumps(value, indent=True).decode()


def resolved(node: Any, components: dict[str, Any], trail: tuple[str, ...] = ()) -> Any:
    """`node` with every reference to a component schema replaced by that schema (a schema
    that refers to itself, through any path, keeps the reference where it would recur)."""
    if isinstance(node, list):
        return [resolved(item, components, trail) for item in node]
    if not isinstance(node, dict):
        return node
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith(_COMPONENT):
        name = reference.removeprefix(_COMPONENT)
        if name in components and name not in trail:
            beside = {key: value for key, value in node.items() if key != "$ref"}
            target = resolved(components[name], components, (*trail, name))
            return {**target, **resolved(beside, components, trail)}
    return {key: resolved(value, components, trail) for key, value in node.items()}


def catalogue(document: dict[str, Any]) -> list[EventTypeEntry]:
    """The event types of the document's `webhooks` section, in its order: each one's
    description (its summary, without the type's name), body schema and examples."""
    components = document.get("components", {}).get("schemas", {})
    entries = []
    for name, path_item in document.get("webhooks", {}).items():
        operation = path_item.get("post", {})
        summary = str(operation.get("summary", ""))
        content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        samples = [
            Sample(key, str(example.get("summary", "")), pretty(example.get("value")))
            for key, example in content.get("examples", {}).items()
        ]
        entries.append(
            EventTypeEntry(
                name=name,
                description=summary.removeprefix(f"{name}: "),
                schema=pretty(resolved(content.get("schema", {}), components)),
                samples=samples,
            )
        )
    return entries
