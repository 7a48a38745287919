"""The link document every operation answers is exactly the documented PaymentLinkOut shape."""

from __future__ import annotations

import functools
import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from tucano.app import create_app
from tucano.core import json_codec
from tucano.core.money import Money
from tucano.payment_links.domain import status_at
from tucano.payment_links.schemas import PaymentLinkOut, PaymentView, link_document

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
# What the API lets into a text field: no NUL, no lone surrogate.
TEXT = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))


class LinkRow(NamedTuple):
    uuid: uuid.UUID
    payer_name: str
    registration_number: str
    amount_cents: int
    numbers_installments: int
    status: str
    description: str | None
    verification_token: int
    user_reference: str | None
    created_at: datetime
    expiration_days: int
    expires_at: datetime
    refunded_cents: int


class RefundRow(NamedTuple):
    uuid: uuid.UUID
    amount_cents: int
    reason: str | None
    status: str
    failure_reason: str | None
    created_at: datetime
    completed_at: datetime | None


@st.composite
def links(draw: st.DrawFn) -> tuple[LinkRow, PaymentView | None, list[RefundRow]]:
    days = draw(st.integers(1, 10))
    created = NOW - timedelta(milliseconds=draw(st.integers(0, 20 * 86_400_000)))
    cents = draw(st.integers(1, 99_999_999_999))
    status = draw(st.sampled_from(["CREATED", "PAID", "CANCELLED", "REFUNDED"]))
    paid = status in ("PAID", "REFUNDED")
    refunds = [
        RefundRow(
            uuid=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))),
            amount_cents=draw(st.integers(1, cents)),
            reason=draw(st.none() | st.text(TEXT, max_size=140)),
            status=refund_status,
            failure_reason="refused" if refund_status == "FAILED" else None,
            created_at=created,
            completed_at=None if refund_status == "PENDING" else created,
        )
        for refund_status in draw(
            st.lists(st.sampled_from(["PENDING", "SUCCEEDED", "FAILED"]), max_size=3 if paid else 0)
        )
    ]
    link = LinkRow(
        uuid=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))),
        payer_name=draw(st.text(TEXT, min_size=1, max_size=100)),
        registration_number="52998224725",
        amount_cents=cents,
        numbers_installments=draw(st.integers(1, 10)),
        status=status,
        description=draw(st.none() | st.text(TEXT, max_size=140)),
        verification_token=draw(st.integers(100_000, 999_999)),
        user_reference=draw(st.none() | st.text(TEXT, max_size=77)),
        created_at=created,
        expiration_days=days,
        expires_at=created + timedelta(days=days),
        refunded_cents=sum(r.amount_cents for r in refunds if r.status == "SUCCEEDED"),
    )
    payment = (
        PaymentView(2, "pay_x", "E00000000202611221200abcdefghijk", created, 1, cents)
        if paid
        else None
    )
    return link, payment, refunds


@given(links())
def test_the_document_is_the_documented_shape(
    drawn: tuple[LinkRow, PaymentView | None, list[RefundRow]],
) -> None:
    link, payment, refunds = drawn
    document = json_codec.dumps(
        link_document(
            link,
            payment,
            refunds,
            now=NOW,
            public_url="https://pay.example",
            checkout_key=b"k" * 32,
        )
    )
    model = PaymentLinkOut.model_validate_json(document)
    # The model renders the very same JSON: no field more, less or spelled otherwise.
    assert json_codec.loads(json_codec.dumps(model)) == json_codec.loads(document)
    assert model.status.description == status_at(link, NOW)
    assert model.amount == json_codec.loads(document)["amount"]


@functools.cache
@functools.cache
def documented_amount_pattern() -> str:
    schema = create_app().openapi()["components"]["schemas"]["PaymentLinkCreate"]
    (pattern,) = [s["pattern"] for s in schema["properties"]["amount"]["anyOf"] if "pattern" in s]
    return str(pattern)


_AMOUNT_TEXT = st.from_regex(r"\A0{0,34}[0-9]{0,12}(\.[0-9]{0,4}0{0,38})?\Z", fullmatch=True)


@given(_AMOUNT_TEXT)
def test_the_documented_amount_pattern_takes_the_strings_create_takes(text: str) -> None:
    """A client that checks an amount string against the OpenAPI document's pattern sends
    exactly the strings that create accepts (above the lower bound, which a pattern cannot
    say)."""
    pattern = documented_amount_pattern()
    try:
        if Decimal(text) < Decimal("0.01"):
            return
    except InvalidOperation:
        pass
    try:
        TypeAdapter(Money).validate_python(text)
        accepted = True
    except ValidationError:
        accepted = False
    assert (re.search(pattern, text) is not None) == accepted, text
