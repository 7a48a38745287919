"""The checkout page's words and values for its template, in the payer's language."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import segno

from tucano.checkout.cards import CardProblem, security_code_lengths
from tucano.checkout.service import Checkout
from tucano.checkout.texts import TEXTS, Language, hour, moment, money
from tucano.core.money import from_cents
from tucano.payment_links.domain import (
    METHOD_PIX,
    installment_options,
    split_into_installments,
)


@dataclass(frozen=True)
class CardForm:
    """A refused or invalid submission shown again: never its number or security code."""

    holder: str = ""
    expiry: str = ""
    installments: int = 1
    problems: Mapping[str, str] = field(default_factory=dict)


def offered_installments(amount_cents: int, most: int) -> list[tuple[int, Any]]:
    """The options a card charge can be split into: none under a cent (a link of R$ 0,03 in up
    to 10 offers 1x to 3x; installmentsOptions lists them all)."""
    return installment_options(amount_cents, min(most, amount_cents))


def qr_svg(code: str, label: str) -> str:
    """The BR Code as an inline SVG QR code, sized by the stylesheet."""
    svg: str = segno.make(code, error="m", micro=False).svg_inline(
        scale=1,
        border=4,
        omitsize=True,
        svgclass="qr-code",
        lineclass=None,
        title=label,
        dark="#000",
        light="#fff",
    )
    return svg.replace("<svg ", '<svg role="img" aria-label="' + _attribute(label) + '" ', 1)


def _attribute(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def problem_text(problem: CardProblem | str, language: Language, *, digits: str = "3") -> str:
    return TEXTS[language][str(problem)].format(digits=digits)


def page_context(
    checkout: Checkout,
    *,
    language: Language,
    sandbox: bool,
    urls: Mapping[str, str],
    csrf_token: str,
    form: CardForm | None = None,
    alert: str | None = None,
) -> dict[str, Any]:
    """Everything checkout.html reads."""
    t = TEXTS[language]
    link = checkout.link
    amount = money(from_cents(link.amount_cents), language)
    merchant_name = checkout.merchant.name if checkout.merchant else None
    context: dict[str, Any] = {
        "t": t,
        "lang": language,
        "urls": urls,
        "csrf_token": csrf_token,
        "sandbox": sandbox,
        "link": link,
        "paid": checkout.status == "PAID",
        "amount": amount,
        "title": t["page_title"].format(amount=amount),
        "heading": t["charge_from"].format(merchant=merchant_name) if merchant_name else None,
        "merchant_name": merchant_name,
        "hint": t["verification_hint"].format(merchant=merchant_name)
        if merchant_name
        else t["verification_hint_plain"],
        "expires": moment(link.expires_at, language),
        "pix_code": checkout.pix_code,
        "qr_svg": qr_svg(checkout.pix_code, t["qr_label"].format(amount=amount))
        if checkout.pix_code
        else None,
        "cards_accepted": checkout.cards_accepted,
        "card_locked": t["card_locked"].format(hour=hour(checkout.card_locked_until))
        if checkout.card_locked_until
        else None,
        "options": [
            (n, t["installment_option"].format(n=n, amount=money(each, language)))
            for n, each in offered_installments(link.amount_cents, link.numbers_installments)
        ],
        "form": form or CardForm(),
        "alert": alert,
        "security_code_max": max(security_code_lengths(None)),
        "receipt": _receipt(checkout, language) if checkout.payment is not None else None,
    }
    context["no_methods"] = (
        checkout.status == "CREATED" and not checkout.pix_code and not checkout.cards_accepted
    )
    return context


def _receipt(checkout: Checkout, language: Language) -> dict[str, Any]:
    t = TEXTS[language]
    payment = checkout.payment
    assert payment is not None
    if payment.method == METHOD_PIX:
        method = t["method_pix"]
    elif checkout.paid_by_card is not None:
        card = checkout.paid_by_card
        method = t["method_card"].format(brand=card.brand, last4=card.last4)
    else:
        method = t["method_card_plain"]
    parts = (
        [int(cents) for cents in payment.installment_cents.split(",")]
        if payment.installment_cents
        else split_into_installments(payment.amount_cents, payment.installments)
    )
    if payment.installments == 1:
        installments = t["one_installment"].format(amount=money(from_cents(parts[0]), language))
    elif parts[0] == parts[-1]:
        installments = t["equal_installments"].format(
            n=len(parts), amount=money(from_cents(parts[0]), language)
        )
    else:
        installments = t["unequal_installments"].format(
            n=len(parts),
            first=money(from_cents(parts[0]), language),
            rest_n=len(parts) - 1,
            rest=money(from_cents(parts[-1]), language),
        )
    merchant = checkout.merchant.name if checkout.merchant else "Tucano"
    return {
        "method": method,
        "installments": installments,
        "date": moment(payment.paid_at, language),
        "receipt_id": payment.payment_receipt,
        "amount": money(from_cents(payment.amount_cents), language),
        "keep": t["receipt_keep"].format(merchant=merchant),
        "card": payment.method != METHOD_PIX,
    }
