"""The link document every operation answers is exactly the documented PaymentLinkOut shape."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from hypothesis import given
from hypothesis import strategies as st

from tucano import wire
from tucano.payment_links.schemas import PaymentLinkOut, PaymentView, link_document, status_at

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


@st.composite
def links(draw: st.DrawFn) -> tuple[LinkRow, PaymentView | None]:
    days = draw(st.integers(1, 10))
    created = NOW - timedelta(milliseconds=draw(st.integers(0, 20 * 86_400_000)))
    cents = draw(st.integers(1, 99_999_999_999))
    paid = draw(st.booleans())
    link = LinkRow(
        uuid=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))),
        payer_name=draw(st.text(TEXT, min_size=1, max_size=100)),
        registration_number="52998224725",
        amount_cents=cents,
        numbers_installments=draw(st.integers(1, 10)),
        status="PAID" if paid else "CREATED",
        description=draw(st.none() | st.text(TEXT, max_size=140)),
        verification_token=draw(st.integers(100_000, 999_999)),
        user_reference=draw(st.none() | st.text(TEXT, max_size=77)),
        created_at=created,
        expiration_days=days,
        expires_at=created + timedelta(days=days),
    )
    payment = (
        PaymentView(2, "pay_x", "E00000000202611221200abcdefghijk", created, 1, cents)
        if paid
        else None
    )
    return link, payment


@given(links())
def test_the_document_is_the_documented_shape(drawn: tuple[LinkRow, PaymentView | None]) -> None:
    link, payment = drawn
    document = wire.dumps(
        link_document(
            link, payment, now=NOW, public_url="https://pay.example", checkout_key=b"k" * 32
        )
    )
    model = PaymentLinkOut.model_validate_json(document)
    # The model renders the very same JSON: no field more, less or spelled otherwise.
    assert wire.loads(wire.dumps(model)) == wire.loads(document)
    assert model.status.description == status_at(link, NOW)
    assert model.amount == wire.loads(document)["amount"]
