"""The portal's payment-link forms (create a link, refund one) read into the API's own schemas
(PaymentLinkCreate, RefundCreate), so a form takes exactly what the API takes; what they refuse
is said next to its field, in the page's language where the problem is a common one."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from tucano.api.errors import describe_validation_error, field_name
from tucano.core.card_numbers import holds_a_card_number
from tucano.core.errors import BadRequest
from tucano.core.languages import Language
from tucano.core.money import MAX_AMOUNT, MIN_AMOUNT
from tucano.payment_links.schemas import PaymentLinkCreate, RefundCreate
from tucano.portal.texts import TEXTS

CREATE_FIELDS = (
    "payerName",
    "registrationNumber",
    "amount",
    "numbersInstallments",
    "expirationDays",
    "description",
    "userReference",
)
REFUND_FIELDS = ("amount", "reason")
KEY_FIELD = "key"  # the form's x-transaction-id: the same form sent twice acts once
_INTEGERS = {"numbersInstallments", "expirationDays"}
_GROUPED = {
    "pt-BR": re.compile(r"[0-9]{1,3}(?:\.[0-9]{3})+"),  # 1.234 is a thousand and more here
    "en": re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+"),
}


@dataclass
class FormState:
    """A form as the page shows it again: what was typed, what is wrong by field, a problem of
    the whole form, and its key (kept, so that a second send of it acts once)."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    key: str = field(default_factory=lambda: str(uuid.uuid4()))


def amount_text(typed: str, language: Language) -> str:
    """An amount as a person types it (R$ 1.234,56 or 1234.56; 1,234.56 in English) as the API
    writes it (1234.56); what is not one is passed on for the schema to refuse."""
    text = typed.replace("R$", "").replace(" ", "").replace("\u00a0", "")
    decimal, grouping = (",", ".") if language == "pt-BR" else (".", ",")
    if _GROUPED[language].fullmatch(text):
        return text.replace(grouping, "")
    if "," in text and "." in text:
        # Both: the last one is the decimal separator, whatever the language.
        decimal, grouping = (",", ".") if text.rfind(",") > text.rfind(".") else (".", ",")
        return text.replace(grouping, "").replace(decimal, ".")
    return text.replace(",", ".")


def amount_field(amount: Decimal, language: Language) -> str:
    """An amount as the form's field shows it: 40,00 (Portuguese) or 40.00 (English)."""
    text = f"{amount:.2f}"
    return text.replace(".", ",") if language == "pt-BR" else text


def _prepared(fields: Mapping[str, str], language: Language) -> dict[str, Any]:
    """The fields as the schema takes them: an empty one left out (missing, or None when it is
    optional), whole numbers as integers, amounts as the API writes them."""
    prepared: dict[str, Any] = {}
    for name, value in fields.items():
        if not value.strip():
            continue
        if name in _INTEGERS and value.strip().isdigit():
            prepared[name] = int(value.strip())
        elif name == "amount":
            prepared[name] = amount_text(value, language)
        else:
            prepared[name] = value
    return prepared


def read_create(
    fields: Mapping[str, str], language: Language
) -> tuple[PaymentLinkCreate | None, FormState]:
    """The link the create form asks for, or the form again with what is wrong."""
    state = FormState(values={name: fields.get(name, "") for name in CREATE_FIELDS})
    state.key = fields.get(KEY_FIELD, "")
    try:
        return PaymentLinkCreate.model_validate(_prepared(state.values, language)), state
    except ValidationError as invalid:
        state.errors = field_messages(invalid, language)
        state.problem = TEXTS[language]["form_problem"]
        _forget_card_numbers(state)
        return None, state


def read_refund(
    fields: Mapping[str, str], language: Language
) -> tuple[RefundCreate | None, FormState]:
    """The refund the form asks for (no amount: what is left), or the form with what is wrong."""
    state = FormState(values={name: fields.get(name, "") for name in REFUND_FIELDS})
    state.key = fields.get(KEY_FIELD, "")
    try:
        return RefundCreate.model_validate(_prepared(state.values, language)), state
    except ValidationError as invalid:
        state.errors = field_messages(invalid, language)
        state.problem = TEXTS[language]["refund_problem"]
        _forget_card_numbers(state)
        return None, state


def _forget_card_numbers(state: FormState) -> None:
    # A card number typed where it does not belong is not sent back into the page.
    for name, value in state.values.items():
        if holds_a_card_number(value):
            state.values[name] = ""


def form_key(state: FormState) -> uuid.UUID:
    """The form's key as an x-transaction-id; 400 when the form was not one of the pages'."""
    try:
        return uuid.UUID(state.key)
    except ValueError:
        raise BadRequest(f"{KEY_FIELD} must be the UUID the form was given") from None


def field_messages(invalid: ValidationError, language: Language) -> dict[str, str]:
    """The first problem of each field, as the API says it, or its translation."""
    messages: dict[str, str] = {}
    for error in invalid.errors():
        name = field_name(error.get("loc", ()))
        if name not in messages:
            messages[name] = _message(dict(error), name, language)
    return messages


def _message(error: dict[str, Any], name: str, language: Language) -> str:
    t = TEXTS[language]
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    if kind == "missing" or (kind == "string_too_short" and ctx.get("min_length") == 1):
        return t["v_missing"]
    if kind == "string_too_long":
        return t["v_too_long"].format(most=ctx.get("max_length"))
    if kind in ("greater_than_equal", "less_than_equal"):
        bound = ctx.get("ge", ctx.get("le"))
        if name == "amount":
            limit = MIN_AMOUNT if kind == "greater_than_equal" else MAX_AMOUNT
            bound = amount_field(limit, language)
        return t["v_at_least" if kind == "greater_than_equal" else "v_at_most"].format(
            least=bound, most=bound
        )
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return t["v_integer"]
    if kind == "decimal_max_places":
        return t["v_cents"]
    if kind in ("decimal_parsing", "decimal_type") or (name == "amount" and kind == "value_error"):
        return t["v_number"]
    # The API's own words for the rest (a CPF's check digits, a card number in a text...).
    said = describe_validation_error(error)
    text = said.removeprefix(f"{name} ")
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
