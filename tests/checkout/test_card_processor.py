"""The sandbox processor answers by decisions.md's test cards; a configured one is loaded from
its factory or refused in one line."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from tests.support.settings import TEST_SECRET_KEY, make_settings
from tucano.checkout.card_processor import (
    Approved,
    CardAuthorization,
    CardProcessorError,
    Refusal,
    Refused,
    SandboxCardProcessor,
    load_card_processor,
)
from tucano.checkout.cards import CardDetails, read_card
from tucano.config import ConfigurationError, load_settings


def authorization(number: str, security_code: str = "123") -> CardAuthorization:
    card = read_card(
        {
            "card_number": number,
            "card_holder": "Maria da Silva",
            "card_expiry": "12/39",
            "card_security_code": security_code,
        },
        today=date(2026, 12, 1),
    )
    assert isinstance(card, CardDetails), card
    return CardAuthorization("attempt-1", 10000, (3334, 3333, 3333), card)


@pytest.mark.parametrize(
    ("number", "answer"),
    [
        ("4242 4242 4242 4242", None),
        ("5555 5555 5555 4444", None),
        ("4000 0000 0000 0002", Refused(Refusal.DECLINED)),
        ("4000 0000 0000 9995", Refused(Refusal.INSUFFICIENT_FUNDS)),
        ("4000 0000 0000 0119", Refused(Refusal.PROCESSING_ERROR)),
        ("4111 1111 1111 1111", Refused(Refusal.DECLINED)),
        ("3782 822463 10005", Refused(Refusal.DECLINED)),
    ],
)
async def test_the_sandbox_follows_the_test_cards(number: str, answer: Any) -> None:
    code = "1234" if number.startswith("37") else "123"
    got = await SandboxCardProcessor().authorize(authorization(number, code))
    if answer is None:
        assert isinstance(got, Approved) and got.nsu.isdigit() and 6 <= len(got.nsu) <= 12
    else:
        assert got == answer


def test_without_a_setting_sandbox_gets_the_test_cards_and_production_no_card_payment() -> None:
    assert isinstance(
        load_card_processor(make_settings("sqlite+aiosqlite:///x.db")), SandboxCardProcessor
    )
    production = make_settings("sqlite+aiosqlite:///x.db", environment="production")
    assert load_card_processor(production) is None
    assert (
        load_card_processor(make_settings("sqlite+aiosqlite:///x.db", card_processor="none"))
        is None
    )


def test_the_test_cards_cannot_run_in_production(
    no_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", TEST_SECRET_KEY)
    monkeypatch.setenv("TUCANO_CARD_PROCESSOR", "sandbox")
    with pytest.raises(ConfigurationError, match="TUCANO_CARD_PROCESSOR=sandbox"):
        load_settings(_env_file=None)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("no_such_package.acquirer:factory", "cannot load"),
        ("tests.checkout.test_card_processor:missing", "cannot load"),
        ("tests.checkout.test_card_processor:NOT_CALLABLE", "not callable"),
        ("tests.checkout.test_card_processor:not_a_processor", "gave no CardProcessor"),
    ],
)
def test_a_factory_that_makes_no_processor_is_refused(name: str, says: str) -> None:
    with pytest.raises(CardProcessorError, match=says):
        load_card_processor(make_settings("sqlite+aiosqlite:///x.db", card_processor=name))


def test_a_setting_that_names_no_factory_is_refused(
    no_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUCANO_CARD_PROCESSOR", "my acquirer")
    with pytest.raises(ConfigurationError, match="TUCANO_CARD_PROCESSOR"):
        load_settings(_env_file=None)


NOT_CALLABLE = 42


def not_a_processor(settings: Any) -> object:
    return object()


def test_a_card_never_shows_its_number_in_an_authorization() -> None:
    shown = repr(authorization("4242 4242 4242 4242"))
    assert "4242424242424242" not in shown and "'123'" not in shown
