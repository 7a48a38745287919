"""The sandbox's sample payloads (POST /webhook/v1/test-events): every variant is a valid payload
of its type, with the shape docs/deliveries.md gives it, as its deliveries send it."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, get_args

import pytest

from tucano.brazil.pix import end_to_end_id_time, is_valid_end_to_end_id
from tucano.core import json_codec
from tucano.events.payloads import PAYLOAD_MODELS, LinkEventStatus, published
from tucano.events.samples import VARIANT_SUMMARIES, VARIANTS, Variant, sample_payload
from tucano.events.types import EventType

AT = datetime(2026, 3, 9, 18, 45, 12, 345000, tzinfo=UTC)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
PAYMENT_FIELDS = {"paymentDate", "paymentMethod", "paymentId", "paymentReceipt"}
EVERY_VARIANT = [(t, v) for t, variants in VARIANTS.items() for v in variants]


def delivered(event_type: EventType, **options: Any) -> dict[str, Any]:
    """A sample as its deliveries send it, parsed (numbers with a fraction as Decimal), after
    checking it against its type's model as a published event is checked."""
    body = json_codec.loads(json_codec.dumps(published(sample_payload(event_type, **options))))
    PAYLOAD_MODELS[event_type].model_validate(body)
    return dict(body)


def is_money(value: object) -> bool:
    return isinstance(value, Decimal) and value.as_tuple().exponent == -2


@pytest.mark.parametrize(("event_type", "variant"), EVERY_VARIANT)
def test_every_variant_is_a_valid_payload_of_its_type(
    event_type: EventType, variant: Variant
) -> None:
    for seed in range(40):
        body = delivered(event_type, variant=variant, rng=random.Random(seed), at=AT)
        for name in ("amount", "refundedAmount"):
            assert name not in body or is_money(body[name]), body
        assert "refund" not in body or is_money(body["refund"]["amount"]), body
        for name in ("paymentDate", "statusDate"):
            assert name not in body or TIMESTAMP.fullmatch(body[name]), body


def test_the_default_is_the_first_variant_and_types_without_variants_take_none() -> None:
    for event_type in EventType:
        default = delivered(event_type, rng=random.Random(7), at=AT)
        variants = VARIANTS.get(event_type)
        if variants:
            assert delivered(event_type, variant=variants[0], rng=random.Random(7), at=AT) == (
                default
            )
        else:
            with pytest.raises(ValueError, match="has no variant"):
                sample_payload(event_type, variant="PAID")
    assert VARIANTS[EventType.PAYMENT_LINK_INBOUND][0] == "PAID"
    assert VARIANTS[EventType.PIX_QR_INBOUND][0] == "PAYMENT"


def test_every_variant_is_offered_and_summarised_and_every_link_status_sampled() -> None:
    offered = {variant for variants in VARIANTS.values() for variant in variants}
    assert offered == set(get_args(Variant)) == set(VARIANT_SUMMARIES)
    statuses = {
        delivered(EventType.PAYMENT_LINK_INBOUND, variant=variant)["status"]
        for variant in VARIANTS[EventType.PAYMENT_LINK_INBOUND]
    }
    assert statuses == set(get_args(LinkEventStatus))


def test_a_paid_link_names_its_payment_and_no_refund() -> None:
    body = delivered(EventType.PAYMENT_LINK_INBOUND, variant="PAID", at=AT)
    assert body["status"] == "PAID"
    assert set(body) >= PAYMENT_FIELDS
    assert body["paymentDate"] == "2026-03-09T18:45:12.345Z"
    assert is_valid_end_to_end_id(body["paymentReceipt"])
    assert not {"statusDate", "refund", "refundedAmount"} & set(body)


@pytest.mark.parametrize("variant", ["EXPIRED", "CANCELLED"])
def test_an_unpaid_link_that_ended_has_no_payment_fields(variant: Variant) -> None:
    body = delivered(EventType.PAYMENT_LINK_INBOUND, variant=variant, at=AT)
    assert set(body) == {"paymentLinkUuid", "amount", "userReference", "status", "statusDate"}
    assert body["status"] == variant
    assert body["statusDate"] == "2026-03-09T18:45:12.345Z"


def test_a_refund_event_carries_the_payment_the_refund_and_what_was_given_back() -> None:
    for seed in range(200):
        check_refund_events(seed)


def check_refund_events(seed: int) -> None:
    rng = random.Random(seed)
    # Down to the smallest amount a sample has, 1.00, where the parts are fewest.
    amount = Decimal(rng.choice([100, 101, 113, 199, rng.randrange(100, 500_000)])) / 100
    bodies = {
        variant: delivered(
            EventType.PAYMENT_LINK_INBOUND,
            variant=variant,
            rng=random.Random(seed),
            at=AT,
            amount=amount,
        )
        for variant in ("REFUNDED", "PARTIALLY_REFUNDED", "REFUND_FAILED")
    }
    for body in bodies.values():
        assert set(body) >= PAYMENT_FIELDS
        assert body["amount"] == amount
        assert body["statusDate"] == "2026-03-09T18:45:12.345Z"
        paid_at = datetime.fromisoformat(body["paymentDate"])
        assert AT - timedelta(days=21) < paid_at < AT
        # The end-to-end id is of the minute the link was paid, as BCB's are.
        assert end_to_end_id_time(body["paymentReceipt"]) == paid_at.replace(
            second=0, microsecond=0
        )
        assert set(body["refund"]) == {"refundId", "amount", "status", "failureReason"}
        assert re.fullmatch(
            r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
            body["refund"]["refundId"],
        )

    refunded = bodies["REFUNDED"]
    assert refunded["status"] == "REFUNDED"
    assert refunded["refundedAmount"] == refunded["refund"]["amount"] == amount
    assert (refunded["refund"]["status"], refunded["refund"]["failureReason"]) == (
        "SUCCEEDED",
        None,
    )

    partly = bodies["PARTIALLY_REFUNDED"]
    assert partly["status"] == "PARTIALLY_REFUNDED"
    assert Decimal("0.01") <= partly["refund"]["amount"] == partly["refundedAmount"] < amount
    assert (partly["refund"]["status"], partly["refund"]["failureReason"]) == ("SUCCEEDED", None)

    failed = bodies["REFUND_FAILED"]
    # The link's status as it stands: a first refund gave back part, this one gave back nothing.
    assert failed["status"] == "PARTIALLY_REFUNDED"
    assert Decimal("0.01") <= failed["refundedAmount"] < amount
    assert failed["refund"]["status"] == "FAILED"
    assert failed["refund"]["failureReason"] == (
        "sandbox: a refund whose amount ends in 13 cents fails"
    )
    assert failed["refund"]["amount"] % 1 == Decimal("0.13")
    assert failed["refund"]["amount"] <= amount - failed["refundedAmount"]


@pytest.mark.parametrize("event_type", [EventType.PIX_QR_INBOUND, EventType.PIX_QR_PARTNER_INBOUND])
def test_a_pix_qr_refund_names_its_devolution_and_a_payment_does_not(
    event_type: EventType,
) -> None:
    payment = delivered(event_type, variant="PAYMENT", partner_id=12, at=AT)
    assert (payment["type"], payment["status"], payment["devolutionEndToEndId"]) == (
        "PAYMENT",
        "CONFIRMED",
        None,
    )
    refund = delivered(event_type, variant="REFUND", partner_id=12, at=AT)
    assert (refund["type"], refund["status"]) == ("REFUND", "REFUNDED")
    devolution = refund["devolutionEndToEndId"]
    # BCB's id of a devolution: D, then an end-to-end id's parts, of the moment it was made.
    assert devolution.startswith("D") and is_valid_end_to_end_id(devolution)
    assert end_to_end_id_time(devolution) == AT.replace(second=0, microsecond=0)
    assert refund["endToEndId"].startswith("E") and is_valid_end_to_end_id(refund["endToEndId"])
    assert end_to_end_id_time(refund["endToEndId"]) < AT - timedelta(days=1)
    assert refund["paymentDate"] == "2026-03-09T18:45:12.345Z"
    if event_type is EventType.PIX_QR_PARTNER_INBOUND:
        assert payment["partnerId"] == refund["partnerId"] == 12
