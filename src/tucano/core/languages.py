"""The two languages Tucano's pages speak (Portuguese of Brazil, English), which one a browser
prefers, and how money and moments are written in each. Times are Brasília's
(`America/Sao_Paulo`); money is written with its `R$`."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from tucano.brazil.brasilia_time import BRASILIA

Language = Literal["pt-BR", "en"]
LANGUAGES: tuple[Language, ...] = ("pt-BR", "en")


def preferred_language(accept_language: str) -> Language:
    """English when the browser ranks an English tag above every Portuguese one (q, then order)."""
    best: tuple[float, int, Language] | None = None
    for index, item in enumerate(accept_language.split(",")[:32]):
        tag, _, params = item.strip().partition(";")
        primary = tag.strip().lower().split("-")[0]
        if primary not in ("pt", "en"):
            continue
        quality = 1.0
        name, _, value = params.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                quality = float(value)
            except ValueError:
                continue
        if not 0 < quality <= 1:
            continue
        candidate: tuple[float, int, Language] = (
            quality,
            -index,
            "pt-BR" if primary == "pt" else "en",
        )
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    return best[2] if best is not None else "pt-BR"


def money(amount: Decimal, language: Language) -> str:
    """1234.5 as R$ 1.234,50 (Portuguese) or R$ 1,234.50 (English)."""
    whole, cents = f"{amount:,.2f}".split(".")
    if language == "en":
        return f"R$ {whole}.{cents}"
    return f"R$ {whole.replace(',', '.')},{cents}"


def moment(value: datetime, language: Language) -> str:
    local = value.astimezone(BRASILIA)
    return local.strftime("%d/%m/%Y %H:%M" if language == "pt-BR" else "%Y-%m-%d %H:%M")
