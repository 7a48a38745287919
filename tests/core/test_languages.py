"""The languages of Tucano's pages: the browser's preference decides, and money is written as
each language writes it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tucano.core.languages import money, preferred_language


@pytest.mark.parametrize(
    ("header", "language"),
    [
        ("", "pt-BR"),
        ("pt-BR", "pt-BR"),
        ("en", "en"),
        ("EN-gb", "en"),
        ("en-US,en;q=0.9,pt-BR;q=0.8", "en"),
        ("pt-BR,pt;q=0.9,en-US;q=0.8", "pt-BR"),
        ("en;q=0.5,pt;q=0.6", "pt-BR"),
        ("de-DE,en;q=0.3", "en"),
        ("de-DE", "pt-BR"),
        ("en;q=0, pt;q=0.1", "pt-BR"),  # q=0: not acceptable at all
        ("en;q=abc", "pt-BR"),
        ("en, pt", "en"),  # equal quality: the order says
        (",,;;==", "pt-BR"),
    ],
)
def test_english_only_when_the_browser_prefers_it(header: str, language: str) -> None:
    assert preferred_language(header) == language


def test_money_is_written_as_each_language_writes_it() -> None:
    assert money(Decimal("1234567.5"), "pt-BR") == "R$ 1.234.567,50"
    assert money(Decimal("1234567.5"), "en") == "R$ 1,234,567.50"
    assert money(Decimal("0.01"), "pt-BR") == "R$ 0,01"
