"""The checkout's words: both languages say everything, and the browser's preference decides."""

from __future__ import annotations

import re

from tucano.checkout.texts import EN, PT


def test_both_languages_have_every_text_with_the_same_placeholders() -> None:
    assert set(PT) == set(EN)
    for key in PT:
        assert set(re.findall(r"{(\w+)}", PT[key])) == set(re.findall(r"{(\w+)}", EN[key])), key


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
