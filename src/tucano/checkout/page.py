"""The checkout page's words and values for its template, in the payer's language."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import segno

from tucano.checkout.cards import (
    BRAND_RANGES,
    CARD_FIELDS,
    CardProblem,
    security_code_lengths,
)
from tucano.checkout.service import Checkout
from tucano.checkout.texts import TEXTS, Language, hour, moment, money
from tucano.core.money import from_cents
from tucano.payment_links.domain import (
    METHOD_PIX,
    installment_plans,
    split_into_installments,
)


@dataclass(frozen=True)
class CardForm:
    """A refused or invalid submission shown again: never its number or security code."""

    holder: str = ""
    expiry: str = ""
    installments: int = 1
    problems: Mapping[str, str] = field(default_factory=dict)


def offered_installments(amount_cents: int, most: int) -> list[list[int]]:
    """The splits a card charge is offered in, each as it will be charged (cents of each
    instalment): none under a cent (a link of R$ 0,03 in up to 10 offers 1x to 3x)."""
    return installment_plans(amount_cents, most)


def installments_text(parts: Sequence[int], language: Language) -> str:
    """A split as the payer reads it, the same before paying and on the receipt: `4x de R$ 50,00`,
    or, when one differs, which and by what figures: `4x: 1ª de R$ 24,99 e 3x de R$ 24,97`."""
    t = TEXTS[language]
    first, rest = money(from_cents(parts[0]), language), money(from_cents(parts[-1]), language)
    if parts[0] == parts[-1]:
        return t["equal_installments"].format(n=len(parts), amount=first)
    return t["unequal_installments"].format(
        n=len(parts), first=first, rest_n=len(parts) - 1, rest=rest
    )


def brand_table() -> str:
    """The card brands' issuer ranges (cards.BRAND_RANGES) as JSON, for the form's script to
    name the brand as it is typed by the very table the server reads the number by."""
    return json.dumps(
        [
            [brand.value, [list(span) for span in ranges], max(security_code_lengths(brand))]
            for brand, ranges in BRAND_RANGES
        ],
        separators=(",", ":"),
    )


def focus_target(form: CardForm | None, alert: str | None) -> str | None:
    """The id of what a refused or invalid form's page brings into view and focuses at once:
    the first field to correct, else the alert saying why (a phone's first screen would
    otherwise show the top of the page, as if nothing had happened)."""
    problems = form.problems if form is not None else {}
    for name in (*CARD_FIELDS, "installments"):
        if name in problems:
            return _FIELD_IDS[name]
    return "card-alert" if alert else None


_FIELD_IDS = {
    "card_number": "card-number",
    "card_holder": "card-holder",
    "card_expiry": "card-expiry",
    "card_security_code": "card-security-code",
    "installments": "installments",
}


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
    plans = offered_installments(link.amount_cents, link.numbers_installments)
    context: dict[str, Any] = {
        "t": t,
        "lang": language,
        "urls": urls,
        "csrf_token": csrf_token,
        "sandbox": sandbox,
        "pix_simulated": checkout.pix_simulated,
        "pix_pending": checkout.pix_pending,
        "link": link,
        "link_status": checkout.status,
        "cancelled": _cancelled(merchant_name, language)
        if checkout.status == "CANCELLED"
        else None,
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
        "options": [(len(parts), installments_text(parts, language)) for parts in plans],
        # Where an option's instalments differ, the page says why the first is larger.
        "uneven_options": any(parts[0] != parts[-1] for parts in plans),
        "form": form or CardForm(),
        "alert": alert,
        "focus": focus_target(form, alert),
        "brands": brand_table(),
        "pix_check_payee": t["pix_check_payee"].format(merchant=merchant_name)
        if merchant_name
        else t["pix_check_payee_plain"],
        "security_code_max": max(security_code_lengths(None)),
        "receipt": _receipt(checkout, language) if checkout.payment is not None else None,
    }
    context["no_methods"] = (
        checkout.status == "CREATED"
        and not checkout.pix_code
        and not checkout.pix_pending
        and not checkout.cards_accepted
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
    else:
        installments = installments_text(parts, language)
    merchant = checkout.merchant.name if checkout.merchant else "Tucano"
    return {
        "method": method,
        "installments": installments,
        "date": moment(payment.paid_at, language),
        "receipt_id": payment.payment_receipt,
        "amount": money(from_cents(payment.amount_cents), language),
        "keep": t["receipt_keep"].format(merchant=merchant),
        "card": payment.method != METHOD_PIX,
        "refunds": _refunds(checkout, language),
    }


def _cancelled(merchant_name: str | None, language: Language) -> str:
    t = TEXTS[language]
    if merchant_name:
        return t["cancelled_text"].format(merchant=merchant_name)
    return t["cancelled_text_plain"]


def _refunds(checkout: Checkout, language: Language) -> dict[str, Any] | None:
    """What the receipt says of the payment's refunds: each that succeeded (its amount, and when
    in Brasília time) and each still being processed. A failed one is left out, and no reason
    of a refund is ever shown: they are the merchant's business, not the payer's."""
    t = TEXTS[language]
    shown = [r for r in checkout.refunds if r.status in ("SUCCEEDED", "PENDING")]
    if not shown:
        return None
    payment = checkout.payment
    assert payment is not None
    lines = []
    for refund in shown:
        amount = money(from_cents(refund.amount_cents), language)
        if refund.status == "SUCCEEDED":
            when = moment(refund.completed_at or refund.created_at, language)
            lines.append((refund.status, t["refund_succeeded"].format(amount=amount, date=when)))
        else:
            lines.append((refund.status, t["refund_pending"].format(amount=amount)))
    refunded = sum(r.amount_cents for r in shown if r.status == "SUCCEEDED")
    if checkout.status == "REFUNDED":
        heading = t["refunded_full"]
    else:
        heading = t["refunded_partly"] if refunded else t["refund_in_progress"]
    return {
        "heading": heading,
        "total": money(from_cents(refunded), language) if refunded else None,
        "lines": lines,
        "back_to": t["refund_to_pix"] if payment.method == METHOD_PIX else t["refund_to_card"],
    }
