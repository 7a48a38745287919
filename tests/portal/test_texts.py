"""The portal's words: both languages say everything, and the navigation has the names
decisions.md fixes (English), with the page's own translation in Portuguese."""

from __future__ import annotations

import re

from tucano.core.errors import ErrorCode
from tucano.portal.texts import EN, PT, SECTIONS


def test_both_languages_have_every_text_with_the_same_placeholders() -> None:
    assert set(PT) == set(EN)
    for key in PT:
        assert set(re.findall(r"{(\w+)}", PT[key])) == set(re.findall(r"{(\w+)}", EN[key])), key


def test_the_navigation_has_the_names_people_and_tests_find_it_by() -> None:
    english = [EN[f"nav_{key}"] for key, _ in SECTIONS]
    portuguese = [PT[f"nav_{key}"] for key, _ in SECTIONS]
    assert english == ["Webhooks", "Deliveries", "Event types", "Payment links", "Reports"]
    assert portuguese == [
        "Webhooks",
        "Entregas",
        "Tipos de evento",
        "Links de pagamento",
        "Relatórios",
    ]


def test_every_portal_error_has_its_page() -> None:
    for code in ErrorCode:
        if code.name.startswith("PORTAL_"):
            for part in ("title", "heading", "text"):
                assert f"{code.name}_{part}" in PT, code
