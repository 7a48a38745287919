"""What the event catalogue page says, in Portuguese (Brazil) and English; merged into
texts.py's catalogue. The descriptions, schemas and samples are the OpenAPI document's."""

from __future__ import annotations

from collections.abc import Mapping

EVENT_TYPES_PT: Mapping[str, str] = {
    "event_types_intro": "Os sete eventos que o Tucano entrega aos webhooks, como o documento "
    "OpenAPI os descreve (na seção webhooks): o esquema do conteúdo de cada um e exemplos.",
    "event_types_english_note": "Descrições, esquemas e exemplos em inglês, como no documento "
    "OpenAPI.",
    "event_types_contents": "Nesta página",
    "event_schema": "Esquema JSON",
    "event_sample": "Exemplo: {name}",
    "event_sample_only": "Exemplo",
}

EVENT_TYPES_EN: Mapping[str, str] = {
    "event_types_intro": "The seven events Tucano delivers to webhooks, as the OpenAPI document "
    "describes them (in its webhooks section): each one's payload schema and samples.",
    "event_types_english_note": "Descriptions, schemas and samples are in English, as in the "
    "OpenAPI document.",
    "event_types_contents": "On this page",
    "event_schema": "JSON schema",
    "event_sample": "Sample: {name}",
    "event_sample_only": "Sample",
}
