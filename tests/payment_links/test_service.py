"""B1 over HTTP on each database: creating a link, and its x-transaction-id (spec 2.4/4.3,
decisions.md)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select, text
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.deliveries import eventually
from tests.support.payment_links import (
    ALPHANUMERIC_CNPJ,
    BASE,
    CNPJ,
    CPF,
    LINK_FIELDS,
    create,
    listing,
    new_link,
    pay,
    post_link,
    tx,
    window,
)
from tests.support.receivers import Receiver
from tests.support.service import Merchant, RunningService, assert_error_body, start_service
from tests.support.settings import make_settings
from tucano.auth.tokens import derive_key
from tucano.brazil.pix import is_valid_end_to_end_id
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import AppError, ErrorCode
from tucano.db.database import Database
from tucano.deliveries.models import Event
from tucano.payment_links import service as payment_links
from tucano.payment_links.checkout_tokens import verify_checkout_token
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX
from tucano.payment_links.models import Payment, PaymentLink


async def test_create_answers_the_link_with_every_field(
    merchant: Merchant, service: RunningService
) -> None:
    response = await post_link(merchant, new_link())
    assert response.status_code == 200
    body = response.json()
    assert set(body) >= LINK_FIELDS
    assert uuid.UUID(body["linkPaymentUuid"]).version == 4
    assert body["payerName"] == "Maria da Silva"
    assert body["registrationNumber"] == "52998224725"
    assert body["amount"] == 150.0 and b'"amount":150.00' in response.content
    assert body["numbersInstallments"] == 3
    assert body["status"] == {"code": 1, "description": "CREATED"}
    assert body["description"] == "Pedido 42" and body["userReference"] == "order-42"
    assert 100000 <= body["verificationToken"] <= 999999
    assert body["installmentsOptions"] == [
        {"numberInstallments": 1, "amountInstallment": 150.0},
        {"numberInstallments": 2, "amountInstallment": 75.0},
        {"numberInstallments": 3, "amountInstallment": 50.0},
    ]
    assert b'"amountInstallment":75.00' in response.content
    created = datetime.fromisoformat(body["creationDate"])
    assert body["creationDate"].endswith("Z") and len(body["creationDate"]) == 24
    assert abs(created - datetime.now(UTC)) < timedelta(minutes=1)
    assert body["expirationDays"] == 5
    assert datetime.fromisoformat(body["expirationDate"]) - created == timedelta(days=5)
    assert body["payment"] is None

    url = urlsplit(body["urlPayment"])
    assert f"{url.scheme}://{url.netloc}" == service.settings.public_url
    assert url.path == f"/checkout/{body['linkPaymentUuid']}"
    token = parse_qs(url.query)["token"][0]
    key = derive_key(service.settings.secret_key.get_secret_value().encode(), "checkout")  # type: ignore[union-attr]
    verify_checkout_token(token, uuid.UUID(body["linkPaymentUuid"]), keys=[key], now=clock.now())


async def test_optional_fields_may_be_left_out(merchant: Merchant) -> None:
    body = await create(merchant, description=..., userReference=...)
    assert body["description"] is None and body["userReference"] is None


@pytest.mark.parametrize(
    ("amount", "options"),
    [
        (Decimal("100.00"), ["100.00", "50.00", "33.33"]),
        (Decimal("10.00"), ["10.00", "5.00", "3.33", "2.50", "2.00", "1.67"]),
        (Decimal("0.05"), ["0.05", "0.03"]),
        (Decimal("0.01"), ["0.01"]),
    ],
)
async def test_installment_options_are_rounded_half_up(
    merchant: Merchant, amount: Decimal, options: list[str]
) -> None:
    response = await post_link(merchant, new_link(amount=amount, numbersInstallments=len(options)))
    shown = [str(o["amountInstallment"]) for o in response.json()["installmentsOptions"]]
    assert [Decimal(s) for s in shown] == [Decimal(o) for o in options]
    for option in options:
        assert f'"amountInstallment":{option}'.encode() in response.content


@pytest.mark.parametrize(
    ("document", "stored"),
    [
        ("52998224725", "52998224725"),
        (CPF, "52998224725"),
        (CNPJ, "11222333000181"),
        ("11222333000181", "11222333000181"),
        (ALPHANUMERIC_CNPJ, "12ABC34501DE35"),
        ("12abc34501de35", "12ABC34501DE35"),
    ],
)
async def test_cpf_and_cnpj_are_accepted_and_stripped(
    merchant: Merchant, document: str, stored: str
) -> None:
    assert (await create(merchant, registrationNumber=document))["registrationNumber"] == stored


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (new_link(payerName=...), "payerName is required"),
        (new_link(payerName=""), "payerName must not be empty"),
        (new_link(payerName="   "), "payerName must not be empty"),
        (new_link(payerName="x" * 101), "payerName must have at most 100 characters"),
        (new_link(payerName=12), "payerName must be a string"),
        (new_link(registrationNumber=...), "registrationNumber is required"),
        (new_link(registrationNumber="111.111.111-11"), "registrationNumber is not a valid CPF"),
        (new_link(registrationNumber="529.982.247-26"), "registrationNumber is not a valid CPF"),
        (
            new_link(registrationNumber="11.222.333/0001-82"),
            "registrationNumber is not a valid CNPJ",
        ),
        (
            new_link(registrationNumber="12.ABC.345/01DE-36"),
            "registrationNumber is not a valid CNPJ",
        ),
        (new_link(registrationNumber="1234"), "registrationNumber must be a valid CPF"),
        (new_link(registrationNumber=52998224725), "registrationNumber must be a string"),
        (new_link(amount=...), "amount is required"),
        (new_link(amount=Decimal("0")), "amount must be greater than or equal to 0.01"),
        (new_link(amount=Decimal("-5")), "amount must be greater than or equal to 0.01"),
        (new_link(amount=Decimal("0.001")), "amount must be greater than or equal to 0.01"),
        (new_link(amount=Decimal("1.001")), "amount must have at most 2 decimal places"),
        (new_link(amount=Decimal("10.555")), "amount must have at most 2 decimal places"),
        (
            new_link(amount=Decimal("1000000000.00")),
            "amount must be less than or equal to 999999999.99",
        ),
        (new_link(amount="ten"), "amount must be a number"),
        (new_link(amount="1e2"), "amount must be a number"),  # plain notation only in a string
        (new_link(amount=" 10.00"), "amount must be a number"),
        (new_link(amount="10.001"), "amount must have at most 2 decimal places"),
        (new_link(amount="0.00"), "amount must be greater than or equal to 0.01"),
        (new_link(amount=True), "amount must be a number"),
        (new_link(amount=[10]), "amount must be a number"),
        (new_link(numbersInstallments=...), "numbersInstallments is required"),
        (new_link(numbersInstallments=0), "numbersInstallments must be greater than or equal to 1"),
        (new_link(numbersInstallments=11), "numbersInstallments must be less than or equal to 10"),
        (new_link(numbersInstallments=2.5), "numbersInstallments must be an integer"),
        (new_link(numbersInstallments="3"), "numbersInstallments must be an integer"),
        (new_link(expirationDays=...), "expirationDays is required"),
        (new_link(expirationDays=0), "expirationDays must be greater than or equal to 1"),
        (new_link(expirationDays=11), "expirationDays must be less than or equal to 10"),
        (new_link(description="d" * 141), "description must have at most 140 characters"),
        (new_link(userReference="r" * 78), "userReference must have at most 77 characters"),
    ],
)
async def test_create_refuses_each_bad_field(
    merchant: Merchant, body: dict[str, Any], message: str
) -> None:
    error = assert_error_body(await post_link(merchant, body), 400, ErrorCode.INVALID_PARAMETERS)
    assert any(line.startswith(message) for line in error["errors"]), error


DOCUMENT_CHARACTERS = (
    "registrationNumber must be written in ASCII digits and letters, with only dots, dashes, "
    "slashes or spaces between them"
)


@pytest.mark.parametrize(
    "document",
    [
        "529\n982\t247\u200325",
        "529\x1c98224725",
        "RN3QNL\u00dfNOPY55",
        "\uff15\uff12\uff19.982.247-25",
    ],
)
async def test_a_document_with_odd_characters_is_refused(merchant: Merchant, document: str) -> None:
    response = await post_link(merchant, new_link(registrationNumber=document))
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == [DOCUMENT_CHARACTERS]


TEXT_FIELDS = ["payerName", "description", "userReference"]
# Control characters, and the Unicode line separators that end a line as well.
CONTROL_CHARACTERS = ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("field", TEXT_FIELDS)
@pytest.mark.parametrize("character", CONTROL_CHARACTERS)
async def test_text_fields_refuse_control_characters(
    merchant: Merchant, field: str, character: str
) -> None:
    response = await post_link(merchant, new_link(**{field: f"Maria{character}da Silva"}))
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == [
        f"{field} must not hold control characters (a line break, a tab, ...)"
    ]


@pytest.mark.parametrize("field", TEXT_FIELDS)
@pytest.mark.parametrize(
    "card", ["4111111111111111", "4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005"]
)
async def test_text_fields_refuse_card_numbers_without_echoing_them(
    merchant: Merchant, field: str, card: str
) -> None:
    response = await post_link(merchant, new_link(**{field: f"card {card} 123"}))
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == [
        f"{field} has a card number, which no payment link may carry (name a card by its "
        "brand and last four digits)"
    ]
    digits = card.replace(" ", "").replace("-", "")
    assert card not in response.text and digits not in response.text


# As an outside test hid them (issue 36): zero-width spaces, `/`, `,`, `|`, double spaces,
# Arabic-Indic digits; and digits one by one, a 13-digit Visa, Devanagari digits and bars.
HIDDEN_CARDS = [
    "4111\u200b1111\u200b1111\u200b1111",
    "4111/1111/1111/1111",
    "4111,1111,1111,1111",
    "4111|1111|1111|1111",
    "4111  1111  1111  1111",
    "\u0664\u0661\u0661\u0661" + "\u0661" * 12,
    "5 5 0 0 0 0 0 0 0 0 0 0 0 0 0 4",
    "4222222222222",
    "\u096a\u0967\u0967\u0967 | \u0967\u0967\u0967\u0967 | 1111 | 1111",
]


@pytest.mark.parametrize("field", TEXT_FIELDS)
@pytest.mark.parametrize("card", HIDDEN_CARDS)
async def test_text_fields_refuse_card_numbers_however_they_are_written(
    merchant: Merchant, field: str, card: str
) -> None:
    response = await post_link(merchant, new_link(**{field: f"cartão {card} ok"}))
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == [
        f"{field} has a card number, which no payment link may carry (name a card by its "
        "brand and last four digits)"
    ]
    assert card not in response.text


INVISIBLE = [
    "\u200b",  # zero-width space
    "\u200d",  # zero-width joiner
    "\u2060",  # word joiner
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u200f",  # right-to-left mark
    "\ufeff",  # byte order mark
    "\u00ad",  # soft hyphen
    "\U000e0041",  # tag letter A
]


@pytest.mark.parametrize("field", TEXT_FIELDS)
@pytest.mark.parametrize("character", INVISIBLE)
async def test_text_fields_refuse_invisible_formatting_characters(
    merchant: Merchant, field: str, character: str
) -> None:
    for written in (character * 3, f"Maria{character}da Silva", f"{character}avliS ad airaM"):
        response = await post_link(merchant, new_link(**{field: written}))
        error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
        assert error["errors"] == [
            f"{field} must not hold invisible formatting characters (a zero-width space, a "
            "direction mark or override, a soft hyphen, ...)"
        ]


@pytest.mark.parametrize("field", TEXT_FIELDS)
@pytest.mark.parametrize("text", ["\u0301\u0301", " \u20dd ", "\u3164", "\u3164 \u3164", "\u2800"])
async def test_text_fields_refuse_text_that_shows_nothing(
    merchant: Merchant, field: str, text: str
) -> None:
    response = await post_link(merchant, new_link(**{field: text}))
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    assert error["errors"] == [
        f"{field} must have a character one can see (spaces and combining marks alone show nothing)"
    ]


async def test_names_of_people_in_any_script_are_kept(merchant: Merchant) -> None:
    for name in ("João Ávila", "Zoë Ñúñez", "李小龍", "Nguyễn Thị Minh Khai", "محمد علي", "Ана"):
        link = await create(merchant, payerName=name, description=f"Pedido de {name}")
        assert link["payerName"] == name and link["description"] == f"Pedido de {name}"


async def test_text_fields_keep_letters_of_any_script_and_spaces(merchant: Merchant) -> None:
    link = await create(
        merchant,
        payerName="José Ñandú 李 Ωmega",
        description="Pedido nº 42 — café ☕, CPF 529.982.247-25, fone +55 11 98765-4325",
        userReference="ref 2026-01-15 10:30",
    )
    assert link["payerName"] == "José Ñandú 李 Ωmega"
    assert link["description"].startswith("Pedido nº 42")


async def test_an_amount_may_be_a_string_in_plain_decimal_notation(merchant: Merchant) -> None:
    # As PIX APIs write amounts; it is the same request as the number, for idempotency too.
    key = str(uuid.uuid4())
    as_text = await post_link(merchant, new_link(amount="10.5"), headers={"x-transaction-id": key})
    assert as_text.status_code == 200, as_text.text
    assert b'"amount":10.50' in as_text.content
    as_number = await post_link(
        merchant, new_link(amount=Decimal("10.50")), headers={"x-transaction-id": key}
    )
    assert as_number.content == as_text.content


async def test_limits_are_inclusive(merchant: Merchant) -> None:
    body = await create(
        merchant,
        amount=Decimal("999999999.99"),
        numbersInstallments=10,
        expirationDays=10,
        payerName="x" * 100,
        description="d" * 140,
        userReference="r" * 77,
    )
    assert body["amount"] == 999999999.99 and len(body["installmentsOptions"]) == 10
    assert (
        await create(merchant, amount=Decimal("0.01"), numbersInstallments=1, expirationDays=1)
    )["amount"] == 0.01


async def test_integral_amounts_come_back_with_two_decimals(merchant: Merchant) -> None:
    response = await post_link(merchant, new_link(amount=25))
    assert response.status_code == 200
    assert b'"amount":25.00' in response.content


# Only the canonical spelling: others would not be echoed back as sent.
@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "not-a-uuid",
        "1234",
        "{db58d49a-e486-419f-b905-233df3dd61eb}",
        "urn:uuid:db58d49a-e486-419f-b905-233df3dd61eb",
        "db58d49ae486419fb905233df3dd61eb",
    ],
)
async def test_x_transaction_id_is_required_and_a_uuid(
    merchant: Merchant, header: str | None
) -> None:
    headers = {} if header is None else {"x-transaction-id": header}
    error = assert_error_body(
        await post_link(merchant, new_link(), headers=headers),
        400,
        ErrorCode.INVALID_TRANSACTION_ID,
    )
    assert "x-transaction-id" in error["errors"][0]
    for path in ("/link-payment", "/report", f"/{uuid.uuid4()}"):
        response = await merchant.get(BASE + path, params=window(), headers=headers)
        assert_error_body(response, 400, ErrorCode.INVALID_TRANSACTION_ID)


async def test_a_body_of_another_type_is_415_before_the_missing_header(merchant: Merchant) -> None:
    # The documented order: authentication, scope, content type, then validation.
    response = await merchant.post(BASE, content=b"x", headers={"content-type": "text/plain"})
    assert_error_body(response, 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)


# --- idempotency ----------------------------------------------------------------------------


async def test_the_same_transaction_id_and_body_answer_the_same_link(merchant: Merchant) -> None:
    headers = tx()
    first = await post_link(merchant, new_link(), headers=headers)
    again = await post_link(merchant, new_link(amount=Decimal("150.0")), headers=headers)
    assert first.status_code == again.status_code == 200
    assert first.content == again.content
    assert (await listing(merchant))["totalElements"] == 1


async def test_the_same_transaction_id_with_another_body_is_409(merchant: Merchant) -> None:
    headers = tx()
    await post_link(merchant, new_link(), headers=headers)
    conflict = await post_link(merchant, new_link(amount=Decimal("151.00")), headers=headers)
    assert_error_body(conflict, 409, ErrorCode.IDEMPOTENCY_CONFLICT)
    assert (await listing(merchant))["totalElements"] == 1


async def test_racing_requests_with_one_transaction_id_make_one_link(merchant: Merchant) -> None:
    headers = tx()
    same = await asyncio.gather(
        *(post_link(merchant, new_link(), headers=headers) for _ in range(6))
    )
    assert {r.status_code for r in same} == {200}
    assert len({r.content for r in same}) == 1
    other = await asyncio.gather(
        *(post_link(merchant, new_link(amount=Decimal("7.00")), headers=headers) for _ in range(3))
    )
    for response in other:
        assert_error_body(response, 409, ErrorCode.IDEMPOTENCY_CONFLICT)
    assert (await listing(merchant))["totalElements"] == 1


async def test_transaction_ids_are_per_customer(service: RunningService) -> None:
    one, two = await service.merchant(), await service.merchant()
    headers = tx()
    first = (await post_link(one, new_link(), headers=headers)).json()
    second = (await post_link(two, new_link(amount=Decimal("9.99")), headers=headers)).json()
    assert first["linkPaymentUuid"] != second["linkPaymentUuid"]


async def test_a_transaction_id_is_forgotten_after_24_hours(service: RunningService) -> None:
    headers = tx()
    with clock.freeze() as frozen:
        merchant = await service.merchant()
        first = (await post_link(merchant, new_link(), headers=headers)).json()
        frozen.advance(timedelta(hours=24, seconds=1))
        merchant = await service.merchant(customer_id=merchant.customer_id)  # a fresh token
        later = await post_link(merchant, new_link(amount=Decimal("2.00")), headers=headers)
    assert later.status_code == 200
    assert later.json()["linkPaymentUuid"] != first["linkPaymentUuid"]


async def test_a_repeated_transaction_id_header_is_refused(merchant: Merchant) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    response = await merchant.service.http.post(
        BASE,
        content=json_codec.dumps(new_link()),
        headers=[
            *merchant.headers.items(),
            ("content-type", "application/json"),
            ("x-transaction-id", first),
            ("x-transaction-id", second),
        ],
    )
    # Which of the two would be the idempotency key? Neither: nothing is created.
    error = assert_error_body(response, 400, ErrorCode.INVALID_TRANSACTION_ID)
    assert error["errors"] == ["x-transaction-id header must be sent once"]
    assert response.headers["x-transaction-id"] == first  # echoed as the first, as logged
    created = await post_link(merchant, new_link(), headers={"x-transaction-id": first})
    assert created.status_code == 200  # the key was not taken by the refused request
    listed = await merchant.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert listed.json()["totalElements"] == 1


async def test_expired_idempotency_keys_are_pruned_in_batches(private_database: Database) -> None:
    """After a long stop there may be millions: each run of the job deletes a batch, and the
    runner calls again while it did some work. Keys still in their window stay."""
    from tucano.payment_links.models import IdempotencyKey

    long_ago = datetime(2001, 1, 1, tzinfo=UTC)
    async with private_database.session() as session:
        session.add_all(
            IdempotencyKey(
                customer_id=1,
                key=uuid.uuid4(),
                request_hash="x",
                response="{}",
                created_at=long_ago + timedelta(hours=hours),
            )
            for hours in (*range(12), 30)  # twelve expired a day later, one not yet
        )
        await session.commit()
    pruned = []
    for _ in range(4):
        async with private_database.session() as session:
            pruned.append(
                await payment_links.prune_creation_keys(
                    session, now=long_ago + timedelta(hours=36), batch_size=5
                )
            )
            await session.commit()
    assert pruned == [5, 5, 2, 0]
    async with private_database.session() as session:
        left = await session.execute(text("SELECT count(*) FROM payment_link_idempotency_keys"))
    assert left.scalar() == 1


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


async def details(merchant: Merchant, link_uuid: str) -> dict[str, object]:
    response = await merchant.get(f"{BASE}/{link_uuid}", headers=tx())
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_card_payment_splits_exactly_and_publishes_its_event(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, amount=Decimal("100.00"), numbersInstallments=3)
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
    paid = await details(merchant, link["linkPaymentUuid"])
    assert paid["status"] == {"code": 2, "description": "PAID"}
    payment = paid["payment"]
    assert isinstance(payment, dict)
    assert payment["paymentMethod"] == 1 and payment["installments"] == 3
    assert payment["amount"] == 100.0
    assert payment["paymentReceipt"].isdigit()
    async with service.database.session() as session:
        stored = await session.scalar(
            select(Payment)
            .join(PaymentLink)
            .where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
        assert stored is not None and stored.installment_cents == "3334,3333,3333"
        event = await session.scalar(
            select(Event)
            .where(Event.customer_id == merchant.customer_id)
            .order_by(Event.created_at.desc())
        )
    assert event is not None and event.event_type == "PAYMENT_LINK_INBOUND"
    body = json.loads(event.payload)
    assert body == body | {
        "paymentLinkUuid": link["linkPaymentUuid"],
        "paymentMethod": "CREDIT_CARD",
        "paymentId": payment["paymentId"],
        "paymentReceipt": payment["paymentReceipt"],
        "amount": 100.0,
        "userReference": "order-42",
        "numbersInstallments": 3,
        "status": "PAID",
    }
    assert '"amount":100.00' in event.payload


async def test_a_paid_link_is_refused_and_never_expires(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, expirationDays=1)
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    with pytest.raises(AppError) as refused:
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD)
    assert refused.value.code is ErrorCode.PAYMENT_LINK_NOT_PAYABLE
    assert "PAID" in refused.value.errors[0]
    with clock.freeze(clock.now() + timedelta(days=30)):
        fresh = await service.merchant(customer_id=merchant.customer_id)
        assert (await details(fresh, link["linkPaymentUuid"]))["status"] == {
            "code": 2,
            "description": "PAID",
        }


async def test_an_expired_link_cannot_be_paid(service: RunningService, merchant: Merchant) -> None:
    with clock.freeze(clock.now() - timedelta(days=2)):
        link = await create(merchant, expirationDays=1)
    with pytest.raises(AppError) as refused:
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_PIX)
    assert "EXPIRED" in refused.value.errors[0]


async def test_card_installments_are_bounded_by_the_offer(
    service: RunningService, merchant: Merchant
) -> None:
    link = await create(merchant, numbersInstallments=2)
    with pytest.raises(AppError, match="Invalid request"):
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
    assert (await details(merchant, link["linkPaymentUuid"]))["payment"] is None


async def test_no_card_instalment_is_charged_below_a_cent(
    service: RunningService, merchant: Merchant
) -> None:
    # 0.02 offered in up to 10: from 5 on the API's options read 0.00 (decisions.md's rounding to
    # the letter, one option per count as the spec says), and a charge in three would be
    # 0.01 + 0.01 + nothing: the payment takes at most two (and the page offers no more).
    link = await create(merchant, amount=Decimal("0.02"), numbersInstallments=10)
    assert link["installmentsOptions"][4] == {"numberInstallments": 5, "amountInstallment": 0.0}
    with pytest.raises(AppError) as refused:
        await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=3)
    assert refused.value.errors == ["installments must be between 1 and 2 for this link"]
    await pay(service, merchant, link["linkPaymentUuid"], METHOD_CARD, installments=2)
    payment = (await details(merchant, link["linkPaymentUuid"]))["payment"]
    assert isinstance(payment, dict) and payment["installments"] == 2


async def test_payments_are_found_by_method_and_receipt_and_reported(
    service: RunningService, merchant: Merchant
) -> None:
    pix = await create(merchant, amount=Decimal("10.00"))
    card = await create(merchant, amount=Decimal("20.00"))
    await create(merchant, amount=Decimal("40.00"))
    await pay(service, merchant, pix["linkPaymentUuid"], METHOD_PIX)
    await pay(service, merchant, card["linkPaymentUuid"], METHOD_CARD, installments=2)
    receipt = (await details(merchant, pix["linkPaymentUuid"]))["payment"]["paymentReceipt"]  # type: ignore[index]
    assert is_valid_end_to_end_id(receipt)
    by_receipt = await listing(merchant, paymentReceipt=receipt)
    assert [link["linkPaymentUuid"] for link in by_receipt["content"]] == [pix["linkPaymentUuid"]]
    assert (await listing(merchant, paymentMethod=1))["totalElements"] == 1
    assert (await listing(merchant, status="PAID"))["totalElements"] == 2
    report = (await merchant.get(f"{BASE}/report", params=window(), headers=tx())).json()
    assert report["byPaymentMethod"] == [
        {"paymentMethod": 1, "count": 1, "amount": 20.0, "refundedAmount": 0.0},
        {"paymentMethod": 2, "count": 1, "amount": 10.0, "refundedAmount": 0.0},
    ]
    statuses = {s["status"]: s["count"] for s in report["byStatus"]}
    assert statuses == {"CREATED": 1, "PAID": 2, "EXPIRED": 0, "CANCELLED": 0, "REFUNDED": 0}


# --- sandbox auto-payment ------------------------------------------------------------------


async def test_a_link_of_1_01_is_paid_by_pix_on_its_own_and_its_event_delivered(
    delivery_service: RunningService, receiver: Receiver
) -> None:
    merchant = await delivery_service.merchant()
    hook = await merchant.post(
        "/webhook/v1/create",
        json={"targetUrl": receiver.url("/paid"), "eventType": "PAYMENT_LINK_INBOUND"},
    )
    secret = hook.json()["secret"]
    link = await create(merchant, amount=Decimal("1.01"))
    not_auto = await create(merchant, amount=Decimal("1.02"))

    (request,) = await receiver.wait_for("/paid", 1, timeout=15)
    event = StandardWebhook(secret).verify(request.body, request.headers)
    assert event["paymentLinkUuid"] == link["linkPaymentUuid"]
    assert event["paymentMethod"] == "PIX" and event["status"] == "PAID"
    assert event["amount"] == 1.01 and b'"amount":1.01' in request.body
    assert is_valid_end_to_end_id(event["paymentReceipt"])
    assert event["numbersInstallments"] is None
    assert event["paymentDate"].endswith("Z")

    paid = await details(merchant, link["linkPaymentUuid"])
    assert paid["status"] == {"code": 2, "description": "PAID"}
    assert paid["payment"] == {
        "paymentMethod": 2,
        "paymentId": event["paymentId"],
        "paymentReceipt": event["paymentReceipt"],
        "paymentDate": event["paymentDate"],
        "installments": 1,
        "amount": 1.01,
    }
    assert (await details(merchant, not_auto["linkPaymentUuid"]))["status"][
        "description"
    ] == "CREATED"  # type: ignore[index]


async def test_an_auto_payment_survives_a_stop(
    database_url: str, delivery_service: RunningService
) -> None:
    # A link created by a process that stops before its payment is due...
    short_lived = await start_service(
        make_settings(database_url, sandbox_autopay_delay_seconds=0.3), delivery_service.database
    )
    merchant = await short_lived.merchant()
    link = await create(merchant, amount=Decimal("0.01"))
    await short_lived.stop()
    # ...is paid by whichever process runs the jobs next (here, the delivery service's).
    reader = await delivery_service.merchant(customer_id=merchant.customer_id)

    async def paid() -> bool:
        body = await details(reader, link["linkPaymentUuid"])
        return body["status"] == {"code": 2, "description": "PAID"}

    await eventually(paid, timeout=10, what="the auto-payment")


async def test_production_never_pays_on_its_own(production_service: RunningService) -> None:
    merchant = await production_service.merchant()
    link = await create(merchant, amount=Decimal("2.01"))
    async with production_service.database.session() as session:
        stored = await session.scalar(
            select(PaymentLink).where(PaymentLink.uuid == uuid.UUID(link["linkPaymentUuid"]))
        )
    assert stored is not None and stored.autopay_at is None
    unknown = await merchant.get(f"{BASE}/{uuid.uuid4()}", headers=tx())
    assert_error_body(unknown, 404)
