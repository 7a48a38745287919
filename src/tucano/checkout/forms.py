"""The checkout's forms as they arrive: read as `application/x-www-form-urlencoded`, known fields
only, each once, and checked against forgery before anything else is done with them. Nothing of
a form is ever logged or repeated."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request

from tucano.api import forms
from tucano.api.forms import FORM_TYPE
from tucano.brazil.brasilia_time import brasilia_date
from tucano.checkout import csrf
from tucano.checkout.cards import (
    CARD_FIELDS,
    CardDetails,
    card_brand,
    read_card,
    security_code_lengths,
)
from tucano.checkout.page import CardForm, offered_installments, problem_text
from tucano.checkout.service import Checkout
from tucano.checkout.texts import TEXTS, Language
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode

_FIELDS = frozenset({csrf.FIELD, "installments", *CARD_FIELDS})


async def read_form(request: Request) -> dict[str, str]:
    """The checkout form's known fields; 415 for another content type, 400 for a field given
    twice."""
    return await forms.read_form(request, _FIELDS)


def check_forgery(
    request: Request, csrf_key: bytes, form: dict[str, str], link_uuid: uuid.UUID
) -> None:
    """403 unless the form carries its page's field for the cookie this browser holds, and the
    browser does not say it comes from another site."""
    genuine = csrf.is_genuine(
        csrf_key,
        nonce=request.cookies.get(csrf.COOKIE),
        link_uuid=link_uuid,
        token=form.get(csrf.FIELD),
    )
    if csrf.comes_from_another_site(request.headers) or not genuine:
        raise AppError(
            ErrorCode.CHECKOUT_FORM_EXPIRED,
            errors=["the form must be sent from its own checkout page, as that page gave it"],
        )


def form_body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A form's request body, for the OpenAPI document."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                FORM_TYPE: {
                    "schema": {"type": "object", "required": required, "properties": properties}
                }
            },
        }
    }


ANTI_FORGERY_FIELD = {csrf.FIELD: {"type": "string", "description": "From the page's form."}}
SIMULATION_BODY = form_body(ANTI_FORGERY_FIELD, [csrf.FIELD])
CARD_BODY = form_body(
    {
        **ANTI_FORGERY_FIELD,
        "card_number": {"type": "string"},
        "card_holder": {"type": "string"},
        "card_expiry": {"type": "string", "description": "MM/AA"},
        "card_security_code": {"type": "string"},
        "installments": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    [csrf.FIELD, *CARD_FIELDS, "installments"],
)


def read_card_form(
    form: dict[str, str], checkout: Checkout, language: Language
) -> tuple[CardDetails | None, CardForm]:
    """The card of a submitted form, and the form to show again (its problems worded)."""
    t = TEXTS[language]
    card = read_card(form, today=brasilia_date(clock.now()))
    link = checkout.link
    most = len(offered_installments(link.amount_cents, link.numbers_installments))
    installments = form.get("installments", "1").strip()
    problems: dict[str, str] = {}
    if isinstance(card, dict):
        brand = card_brand(form.get("card_number", "").replace(" ", ""))
        digits = (" ou " if language == "pt-BR" else " or ").join(
            str(n) for n in security_code_lengths(brand)
        )
        problems = {name: problem_text(p, language, digits=digits) for name, p in card.items()}
    if not (installments.isascii() and installments.isdigit() and 1 <= int(installments) <= most):
        problems["installments"] = t["installments_invalid"]
    kept = CardForm(
        holder=form.get("card_holder", "")[:50],
        expiry=form.get("card_expiry", "")[:7],
        installments=int(installments) if "installments" not in problems else 1,
        problems=problems,
    )
    return (None if problems or isinstance(card, dict) else card), kept
