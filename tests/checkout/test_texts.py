"""The checkout's words: both languages say everything, and the browser's preference decides."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from tucano.checkout.texts import EN, PT, money, preferred_language


def test_both_languages_have_every_text_with_the_same_placeholders() -> None:
    assert set(PT) == set(EN)
    for key in PT:
        assert set(re.findall(r"{(\w+)}", PT[key])) == set(re.findall(r"{(\w+)}", EN[key])), key


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


def test_pix_is_written_as_the_banco_central_writes_it_but_in_the_labels_decisions_fixes() -> None:
    fixed = {"copy_pix_code": "Copiar código PIX", "simulate_pix": "Simular pagamento PIX"}
    for texts in (PT, EN):
        for key, text in texts.items():
            if texts is PT and key in fixed:
                assert text == fixed[key]
            else:
                assert "PIX" not in text, (key, text)
    assert PT["pix_heading"] == "Pagar com Pix" and PT["method_pix"] == "Pix"


def test_the_receipt_assumes_no_gender_of_the_merchant() -> None:
    assert "avisado" not in PT["receipt_keep"] and "avisada" not in PT["receipt_keep"]
    assert PT["receipt_keep"].format(merchant="Padaria") == (
        "Guarde este comprovante. O pagamento já foi informado a Padaria."
    )


def test_the_pix_part_asks_the_payer_to_check_the_payees_name_in_the_bank_app() -> None:
    assert "app do banco" in PT["pix_check_payee"] and "{merchant}" in PT["pix_check_payee"]
    assert "bank's app" in EN["pix_check_payee"]
