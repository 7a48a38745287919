"""B1-B4 over HTTP on each database: every rule of spec 2.4/4.3 and decisions.md's section."""

from __future__ import annotations

import asyncio
import csv
import io
import uuid
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import text

from tests.support.service import EMPTY_PAGE, Merchant, RunningService, assert_error_body
from tucano.auth.tokens import Scope, derive_key
from tucano.core import json_codec
from tucano.core.clock import clock
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.payment_links import service as links_service
from tucano.payment_links.checkout_tokens import verify_checkout_token

BASE = "/payment-link/v1"
LINK_FIELDS = {
    "linkPaymentUuid",
    "payerName",
    "registrationNumber",
    "amount",
    "numbersInstallments",
    "status",
    "urlPayment",
    "description",
    "verificationToken",
    "installmentsOptions",
    "userReference",
    "creationDate",
    "expirationDays",
}
CPF = "529.982.247-25"
CNPJ = "11.222.333/0001-81"
ALPHANUMERIC_CNPJ = "12.ABC.345/01DE-35"


def new_link(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "payerName": "Maria da Silva",
        "registrationNumber": CPF,
        "amount": Decimal("150.00"),
        "numbersInstallments": 3,
        "expirationDays": 5,
        "description": "Pedido 42",
        "userReference": "order-42",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


def tx() -> dict[str, str]:
    return {"x-transaction-id": str(uuid.uuid4())}


async def post_link(
    merchant: Merchant, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Any:
    return await merchant.post(
        BASE,
        content=json_codec.dumps(body),
        headers={"content-type": "application/json", **(headers if headers is not None else tx())},
    )


async def create(merchant: Merchant, **overrides: Any) -> dict[str, Any]:
    response = await post_link(merchant, new_link(**overrides))
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()


def window(**params: Any) -> dict[str, Any]:
    return {
        "startDate": "2000-01-01T00:00:00.000Z",
        "endDate": "2999-12-31T23:59:59.999Z",
        **params,
    }


async def listing(merchant: Merchant, **params: Any) -> dict[str, Any]:
    response = await merchant.get(f"{BASE}/link-payment", params=window(**params), headers=tx())
    assert response.status_code == 200, response.text
    return dict(response.json())


# --- B1 create ----------------------------------------------------------------------------


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


# --- B3 details, lifecycle -----------------------------------------------------------------


async def test_details_answer_the_link(merchant: Merchant) -> None:
    created = await create(merchant)
    response = await merchant.get(f"{BASE}/{created['linkPaymentUuid']}", headers=tx())
    assert response.status_code == 200
    assert response.json() == created


@pytest.mark.parametrize(
    "bad",
    [
        "not-a-uuid",
        "123",
        "00000000-0000-0000-0000-00000000000g",
        "db58d49ae486419fb905233df3dd61eb",
        "urn:uuid:db58d49a-e486-419f-b905-233df3dd61eb",
    ],
)
async def test_a_bad_uuid_is_a_400(merchant: Merchant, bad: str) -> None:
    error = assert_error_body(await merchant.get(f"{BASE}/{bad}", headers=tx()), 400)
    assert error["errors"][0].startswith("linkPaymentUuid must be a UUID")


async def test_another_customers_link_is_answered_like_a_missing_one(
    service: RunningService,
) -> None:
    owner, stranger = await service.merchant(), await service.merchant()
    theirs = (await create(owner))["linkPaymentUuid"]
    foreign = await stranger.get(f"{BASE}/{theirs}", headers=tx())
    missing = await stranger.get(f"{BASE}/{uuid.uuid4()}", headers=tx())
    a = assert_error_body(foreign, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)
    b = assert_error_body(missing, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)
    assert (a["message"], a["errors"]) == (b["message"], b["errors"])
    assert (await listing(stranger))["totalElements"] == 0
    report = (await stranger.get(f"{BASE}/report", params=window(), headers=tx())).json()
    assert report["totalCount"] == 0


async def test_reads_at_once_each_answer_their_own_link_and_only_to_its_owner(
    service: RunningService,
) -> None:
    # Concurrent reads share statements on PostgreSQL (db.CoalescedLookup): each must still get
    # its own link, and a stranger's read in the same batch nothing.
    owner, stranger = await service.merchant(), await service.merchant()
    links = [await create(owner, amount=Decimal(f"{10 + i}.00")) for i in range(12)]
    reads = [(owner, link) for link in links] * 3 + [(stranger, link) for link in links]
    answers = await asyncio.gather(
        *(reader.get(f"{BASE}/{link['linkPaymentUuid']}", headers=tx()) for reader, link in reads)
    )
    for (reader, link), answer in zip(reads, answers, strict=True):
        if reader is owner:
            assert answer.status_code == 200, answer.text
            assert answer.json() == link
        else:
            assert_error_body(answer, 404, ErrorCode.PAYMENT_LINK_NOT_FOUND)


async def test_a_link_expires_exactly_at_its_expiration_date(service: RunningService) -> None:
    start = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
    with clock.freeze(start) as frozen:
        merchant = await service.merchant()
        link = await create(merchant, expirationDays=2)
        path = f"{BASE}/{link['linkPaymentUuid']}"
        frozen.advance(timedelta(days=2) - timedelta(milliseconds=1))
        merchant = await service.merchant(customer_id=merchant.customer_id)
        assert (await merchant.get(path, headers=tx())).json()["status"] == {
            "code": 1,
            "description": "CREATED",
        }
        frozen.advance(timedelta(milliseconds=1))
        assert (await merchant.get(path, headers=tx())).json()["status"] == {
            "code": 3,
            "description": "EXPIRED",
        }
        assert (await listing(merchant, status="EXPIRED"))["totalElements"] == 1
        assert (await listing(merchant, status="CREATED"))["totalElements"] == 0


# --- B2 list --------------------------------------------------------------------------------


async def test_list_is_the_page_shape_newest_first(merchant: Merchant) -> None:
    empty = await listing(merchant)
    assert empty == EMPTY_PAGE
    made = [await create(merchant, amount=Decimal(f"{n}.00")) for n in range(1, 6)]
    page = await listing(merchant, size=2)
    assert [link["linkPaymentUuid"] for link in page["content"]] == [
        made[4]["linkPaymentUuid"],
        made[3]["linkPaymentUuid"],
    ]
    assert page | {"content": None} == {
        "content": None,
        "totalElements": 5,
        "totalPages": 3,
        "size": 2,
        "number": 0,
        "first": True,
        "last": False,
        "empty": False,
    }
    assert set(page["content"][0]) >= LINK_FIELDS
    last = await listing(merchant, size=2, page=2)
    assert [link["linkPaymentUuid"] for link in last["content"]] == [made[0]["linkPaymentUuid"]]


async def test_list_dates_bound_creation_inclusive(merchant: Merchant) -> None:
    link = await create(merchant)
    at = link["creationDate"]
    assert (await listing(merchant, startDate=at, endDate=at))["totalElements"] == 1
    moment = datetime.fromisoformat(at)
    just_after = (moment + timedelta(milliseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    just_before = (moment - timedelta(milliseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert (await listing(merchant, startDate=just_after))["totalElements"] == 0
    assert (await listing(merchant, endDate=just_before))["totalElements"] == 0
    # Bounds finer than a millisecond: a start half a millisecond after the link leaves it out,
    # an end half a millisecond after it keeps it.
    for finer in ("5Z", "0001Z", "000001Z"):  # past the six digits a datetime keeps, too
        after = at[:-1] + finer
        assert (await listing(merchant, startDate=after))["totalElements"] == 0, after
        assert (await listing(merchant, endDate=after))["totalElements"] == 1, after
    day = at[:10]
    assert (await listing(merchant, startDate=day, endDate=day))["totalElements"] == 1


async def test_list_filters(merchant: Merchant) -> None:
    a = await create(merchant, registrationNumber=CNPJ, userReference="ref-a")
    await create(merchant, registrationNumber=CPF, userReference="ref-b")
    by_document = await listing(merchant, registrationNumber="11222333000181")
    assert [link["linkPaymentUuid"] for link in by_document["content"]] == [a["linkPaymentUuid"]]
    assert (await listing(merchant, registrationNumber=CNPJ))["totalElements"] == 1
    assert (await listing(merchant, userReference="ref-a"))["totalElements"] == 1
    assert (await listing(merchant, status="CREATED"))["totalElements"] == 2
    assert (await listing(merchant, status="PAID"))["totalElements"] == 0
    assert (await listing(merchant, paymentMethod=2))["totalElements"] == 0
    assert (await listing(merchant, paymentReceipt="E999"))["totalElements"] == 0


async def test_list_sorts(merchant: Merchant) -> None:
    for name, amount in (("Carla", "30.00"), ("Ana", "10.00"), ("Bruno", "20.00")):
        await create(merchant, payerName=name, amount=Decimal(amount))

    async def names(*sort: str) -> list[str]:
        response = await merchant.get(
            f"{BASE}/link-payment",
            params=[*window().items(), *[("sort", s) for s in sort]],
            headers=tx(),
        )
        assert response.status_code == 200, response.text
        return [link["payerName"] for link in response.json()["content"]]

    assert await names() == ["Bruno", "Ana", "Carla"]  # creationDate,desc
    assert await names("amount,asc") == ["Ana", "Bruno", "Carla"]
    assert await names("amount,desc") == ["Carla", "Bruno", "Ana"]
    assert await names("payerName,asc") == ["Ana", "Bruno", "Carla"]
    assert await names("payerName") == ["Ana", "Bruno", "Carla"]
    assert await names("creationDate,asc") == ["Carla", "Ana", "Bruno"]
    assert await names("status,asc", "payerName,desc") == ["Carla", "Bruno", "Ana"]


async def test_a_sort_field_given_twice_is_refused(merchant: Merchant) -> None:
    for repeated in (["amount,asc", "amount,desc"], ["amount"] * 2100):
        response = await merchant.get(
            f"{BASE}/link-payment",
            params=[*window().items(), *[("sort", s) for s in repeated]],
            headers=tx(),
        )
        error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
        assert error["errors"] == ["sort names amount more than once"]


async def test_a_refused_sort_does_not_repeat_a_card_number(merchant: Merchant) -> None:
    for sort in ("4111111111111111,asc", "amount,4111 1111 1111 1111"):
        response = await merchant.get(
            f"{BASE}/link-payment", params={**window(), "sort": sort}, headers=tx()
        )
        error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
        assert "(a key holding a card number)" in error["errors"][0]
        assert "1111" not in response.text


@pytest.mark.parametrize("deep", [10_000, 3])
async def test_every_page_carries_the_total_near_and_far(
    merchant: Merchant, monkeypatch: pytest.MonkeyPatch, deep: int
) -> None:
    # Near pages read page and total in one statement; far ones (lowered here) count first.
    monkeypatch.setattr(links_service, "DEEP_OFFSET", deep)
    made = [(await create(merchant))["linkPaymentUuid"] for _ in range(5)]
    seen = []
    for number in range(3):
        page = await listing(merchant, page=number, size=2, sort="creationDate,asc")
        assert page["totalElements"] == 5 and page["totalPages"] == 3
        seen += [link["linkPaymentUuid"] for link in page["content"]]
    assert sorted(seen) == sorted(made)  # every link once, none twice
    beyond = await listing(merchant, page=9, size=2, status="CREATED")
    assert (beyond["content"], beyond["totalElements"]) == ([], 5)
    assert (await listing(merchant, page=9, size=2, status="PAID"))["totalElements"] == 0


async def test_status_sorts_by_its_code(merchant: Merchant, database: Database) -> None:
    # By code (1 CREATED, 2 PAID, 3 EXPIRED), not alphabetically (CREATED, EXPIRED, PAID).
    with clock.freeze(clock.now() - timedelta(days=30)):
        await create(merchant, payerName="Expired", expirationDays=1)
    paid = await create(merchant, payerName="Paid")
    await create(merchant, payerName="Created")
    async with database.session() as session:
        link, _ = await links_service.get_link(
            session, customer_id=merchant.customer_id, link_uuid=uuid.UUID(paid["linkPaymentUuid"])
        )
        await links_service.pay_link(session, link=link, method=2)
        await session.commit()

    async def codes(direction: str) -> list[tuple[int, str]]:
        page = await listing(merchant, sort=f"status,{direction}")
        return [(link["status"]["code"], link["payerName"]) for link in page["content"]]

    assert await codes("asc") == [(1, "Created"), (2, "Paid"), (3, "Expired")]
    assert await codes("desc") == [(3, "Expired"), (2, "Paid"), (1, "Created")]


async def test_payer_names_sort_by_code_point_whatever_the_database_collation(
    merchant: Merchant, database: Database
) -> None:
    for name in ("ana", "Bruno", "Álvaro", "Maria"):
        await create(merchant, payerName=name)
    alter = "ALTER TABLE payment_links ALTER COLUMN payer_name TYPE varchar(100) COLLATE {}"

    async def set_collation(name: str) -> None:
        async with database.session() as session:
            await session.execute(text(alter.format(name)))
            await session.commit()
        # Pooled connections prepared statements on the column as it was.
        await database.engine.dispose()
        await database.read_engine.dispose()

    if database.dialect == "postgresql":
        # As in a database created with a linguistic default collation (ICU's root locale sorts
        # Álvaro, ana, Bruno, Maria).
        await set_collation('"und-x-icu"')
    try:
        page = await listing(merchant, sort="payerName,asc")
        assert [link["payerName"] for link in page["content"]] == [
            "Bruno",
            "Maria",
            "ana",
            "Álvaro",
        ]
    finally:
        if database.dialect == "postgresql":
            await set_collation('"default"')


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"startDate": None}, "startDate is required"),
        ({"endDate": None}, "endDate is required"),
        ({"startDate": "yesterday"}, "startDate must be an ISO 8601 timestamp"),
        (
            {"startDate": "2026-01-01T00:00:00.000+00:00:00.000001"},
            "startDate must have an offset in hours and minutes",
        ),
        (
            {"endDate": "2026-12-31T00:00:00-03:00:30"},
            "endDate must have an offset in hours and minutes",
        ),
        (
            {"startDate": "2026-02-01", "endDate": "2026-01-01"},
            "startDate must not be after endDate",
        ),
        (
            {"startDate": "2026-02-01", "endDate": "2026-01-31T23:59:59.999Z"},
            "startDate must not be after endDate",
        ),
        (
            {"startDate": "2026-01-01T10:00:00.002Z", "endDate": "2026-01-01T10:00:00.0009Z"},
            "startDate must not be after endDate",
        ),
        # ISO 8601's fraction of an hour or minute, which Python would read as of a second.
        ({"startDate": "2026-01-15T10.5"}, "startDate must give seconds before a fraction"),
        ({"endDate": "2026-01-15T10:30,5Z"}, "endDate must give seconds before a fraction"),
        (  # reversed inside one millisecond: the times as sent decide
            {"startDate": "2026-01-01T10:00:00.0009Z", "endDate": "2026-01-01T10:00:00.0001Z"},
            "startDate must not be after endDate",
        ),
        ({"status": "OPEN"}, "status must be one of"),
        ({"paymentMethod": 3}, "paymentMethod must be one of"),
        ({"paymentMethod": "pix"}, "paymentMethod must be one of"),
        ({"size": 0}, "size must be greater than or equal to 1"),
        ({"size": 101}, "size must be less than or equal to 100"),
        ({"page": -1}, "page must be greater than or equal to 0"),
        ({"sort": "amount,sideways"}, "sort must be field,asc or field,desc"),
        ({"sort": "secret,asc"}, "sort must be field,asc or field,desc"),
    ],
)
async def test_list_refuses_bad_parameters(
    merchant: Merchant, params: dict[str, Any], message: str
) -> None:
    query = {k: v for k, v in window(**params).items() if v is not None}
    response = await merchant.get(f"{BASE}/link-payment", params=query, headers=tx())
    error = assert_error_body(response, 400)
    assert any(line.startswith(message) for line in error["errors"]), error


async def test_a_range_inside_one_millisecond_is_empty_not_reversed(merchant: Merchant) -> None:
    """Times are kept to the millisecond: a start finer than that counts from the next one, and
    an end up to its own. Such a range in one millisecond holds nothing; it is not an error."""
    link = await create(merchant)
    moment = link["creationDate"][:-1]  # ...T10:00:00.123
    inside = {"startDate": moment + "5Z", "endDate": moment + "9Z"}
    assert (await listing(merchant, **inside))["totalElements"] == 0
    report = await merchant.get(f"{BASE}/report", params=inside, headers=tx())
    assert report.status_code == 200 and report.json()["totalCount"] == 0
    # A leap second (RFC 3339's 23:59:60) is a bound like any other, inside its minute's end.
    leap = {"startDate": "2026-12-31T23:59:60Z", "endDate": "2026-12-31T23:59:60.5Z"}
    assert (await listing(merchant, **leap))["totalElements"] == 0
    year = {"startDate": "2026-01-01", "endDate": "2026-12-31T23:59:60Z"}
    assert (await listing(merchant, **year))["totalElements"] == (
        1 if link["creationDate"].startswith("2026") else 0
    )
    # The link's own millisecond, as sent, holds it.
    whole = {"startDate": moment + "Z", "endDate": moment + "Z"}
    assert (await listing(merchant, **whole))["totalElements"] == 1


async def test_a_registration_number_filter_takes_any_punctuation(merchant: Merchant) -> None:
    await create(merchant, registrationNumber="529.982.247-25")
    spaced = "529 . 982 . 247 - 25"  # 20 characters, 11 digits
    assert (await listing(merchant, registrationNumber=spaced))["totalElements"] == 1


# --- B4 report ------------------------------------------------------------------------------


async def test_the_widest_range_there_is_works(merchant: Merchant) -> None:
    created = await create(merchant)
    widest = {"startDate": "0001-01-01", "endDate": "9999-12-31"}
    for path in ("/link-payment", "/report"):
        response = await merchant.get(f"{BASE}{path}", params=widest, headers=tx())
        assert response.status_code == 200, response.text
    listed = (await merchant.get(f"{BASE}/link-payment", params=widest, headers=tx())).json()
    assert [link["linkPaymentUuid"] for link in listed["content"]] == [created["linkPaymentUuid"]]
    report = (await merchant.get(f"{BASE}/report", params=widest, headers=tx())).json()
    assert report["totalCount"] == 1
    assert report["endDate"] == "9999-12-31T23:59:59.999Z"


async def test_report_totals_every_matched_link(merchant: Merchant) -> None:
    await create(merchant, amount=Decimal("10.00"))
    await create(merchant, amount=Decimal("20.50"))
    with clock.freeze(clock.now() - timedelta(days=30)):
        await create(merchant, amount=Decimal("5.25"), expirationDays=1)
    response = await merchant.get(f"{BASE}/report", params=window(size=1), headers=tx())
    assert response.status_code == 200
    report = response.json()
    assert set(report) == {
        "startDate",
        "endDate",
        "totalCount",
        "totalAmount",
        "byStatus",
        "byPaymentMethod",
        "byDay",
    }
    assert report["startDate"] == "2000-01-01T00:00:00.000Z"
    assert report["totalCount"] == 3
    assert Decimal(str(report["totalAmount"])) == Decimal("35.75")
    assert b'"totalAmount":35.75' in response.content
    statuses = {s["status"]: (s["count"], Decimal(str(s["amount"]))) for s in report["byStatus"]}
    assert statuses == {
        "CREATED": (2, Decimal("30.50")),
        "PAID": (0, Decimal("0")),
        "EXPIRED": (1, Decimal("5.25")),
    }
    assert report["byPaymentMethod"] == [
        {"paymentMethod": 1, "count": 0, "amount": 0.0},
        {"paymentMethod": 2, "count": 0, "amount": 0.0},
    ]
    days = report["byDay"]
    assert [d["count"] for d in days] == [1, 2]
    assert days[0]["date"] < days[1]["date"] and len(days[0]["date"]) == 10
    only_expired = (
        await merchant.get(f"{BASE}/report", params=window(status="EXPIRED"), headers=tx())
    ).json()
    assert only_expired["totalCount"] == 1


async def test_report_as_csv_lists_every_matched_link(merchant: Merchant) -> None:
    made = [await create(merchant, payerName=name) for name in ("Ana", "=HYPERLINK(1)", "Caio")]
    response = await merchant.get(
        f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    # One address, two representations by Accept: a cache must key on it.
    assert response.headers["vary"] == "Accept"
    as_json = await merchant.get(f"{BASE}/report", params=window(), headers=tx())
    assert as_json.headers["vary"] == "Accept"
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 3
    assert {r["linkPaymentUuid"] for r in rows} == {m["linkPaymentUuid"] for m in made}
    assert {r["payerName"] for r in rows} == {"Ana", "'=HYPERLINK(1)", "Caio"}
    assert all(r["amount"] == "150.00" and r["status"] == "CREATED" for r in rows)


async def test_a_csv_cell_stays_one_cell_with_either_separator(merchant: Merchant) -> None:
    # `;` is Excel's separator in pt-BR: unquoted, "a;=cmd" would put a formula in a cell.
    await create(merchant, description="a;=cmd|' /C calc'!A0;")
    response = await merchant.get(
        f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
    )
    for separator in (",", ";", "\t"):
        cells = [
            c for row in csv.reader(io.StringIO(response.text), delimiter=separator) for c in row
        ]
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells), separator


async def test_csv_streams_in_chunks_without_gaps_or_repeats(
    merchant: Merchant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(links_service, "CSV_CHUNK", 3)
    with clock.freeze() as frozen:
        made = []
        for _ in range(7):
            made.append(await create(merchant))
            frozen.advance(timedelta(milliseconds=1 if len(made) % 2 else 0))  # ties too
    response = await merchant.get(
        f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
    )
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert sorted(r["linkPaymentUuid"] for r in rows) == sorted(m["linkPaymentUuid"] for m in made)
    dates = [r["creationDate"] for r in rows]
    assert dates == sorted(dates, reverse=True)  # newest first


async def test_a_csv_download_cut_off_midway_leaves_the_database_usable(
    merchant: Merchant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Many short chunk reads per download, so that a client going away lands in one of them.
    monkeypatch.setattr(links_service, "CSV_CHUNK", 2)
    for _ in range(60):
        await create(merchant)
    host, port = urlsplit(merchant.service.base_url).netloc.split(":")
    query = "&".join(f"{k}={v}" for k, v in window().items())
    request = (
        f"GET {BASE}/report?{query} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {merchant.token}\r\nAccept: text/csv\r\n"
        f"x-transaction-id: {uuid.uuid4()}\r\n\r\n"
    ).encode()
    for attempt in range(40):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request)
        await reader.readuntil(b"\r\n\r\n")  # the headers: the body is streaming
        await asyncio.sleep(attempt % 8 / 1000)
        writer.transport.abort()  # a reset, mid-stream
    await asyncio.sleep(0.2)
    # Writes and reads still go through, promptly.
    async with asyncio.timeout(5):
        await create(merchant)
        assert (await listing(merchant))["totalElements"] == 61


@pytest.mark.parametrize("method", ["2.0", "+2", " 2", "two", "0", "3"])
async def test_payment_method_filter_is_plain_digits(merchant: Merchant, method: str) -> None:
    response = await merchant.get(
        f"{BASE}/link-payment", params=window(paymentMethod=method), headers=tx()
    )
    error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
    # One message for every bad value, whether it is not a number or not a method.
    assert error["errors"] == ["paymentMethod must be one of: 1, 2"]


async def test_a_date_alone_in_any_iso_form_is_the_whole_day(merchant: Merchant) -> None:
    today = clock.now().date()
    with clock.freeze(datetime.combine(today, time(0, 30), tzinfo=UTC)):
        await create(merchant)
    year, week, weekday = today.isocalendar()
    for end in (today.isoformat(), today.strftime("%Y%m%d"), f"{year}-W{week:02d}-{weekday}"):
        listed = await listing(merchant, startDate=today.isoformat(), endDate=end)
        assert listed["totalElements"] == 1, end
    before = f"{today.isoformat()}T00:15:00Z"
    assert (await listing(merchant, startDate=today.isoformat(), endDate=before))[
        "totalElements"
    ] == 0


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("9999-12-31T00:00:00.001Z", "9999-12-31T23:59:59.999Z"),
        ("9999-12-31T12:00:00Z", "9999-12-31"),
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
        ("0001-01-01", "0999-12-31T10:00:00Z"),
    ],
)
async def test_ranges_at_the_edges_of_time(merchant: Merchant, start: str, end: str) -> None:
    for path in ("/link-payment", "/report"):
        response = await merchant.get(
            f"{BASE}{path}", params={"startDate": start, "endDate": end}, headers=tx()
        )
        assert response.status_code == 200, response.text
    report = (
        await merchant.get(
            f"{BASE}/report", params={"startDate": start, "endDate": end}, headers=tx()
        )
    ).json()
    for field in ("startDate", "endDate"):  # ISO 8601: four-digit years
        assert len(report[field]) == 24 and report[field].endswith("Z"), report[field]


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


# --- scopes --------------------------------------------------------------------------------


async def test_scopes_are_enforced(service: RunningService) -> None:
    reader = await service.merchant(scopes=[Scope.PAYMENT_LINK_READ])
    assert_error_body(await post_link(reader, new_link()), 403, ErrorCode.INSUFFICIENT_SCOPE)
    assert (
        await reader.get(f"{BASE}/link-payment", params=window(), headers=tx())
    ).status_code == 200
    writer_only = await service.merchant(scopes=[Scope.PAYMENT_LINK_WRITE])
    response = await writer_only.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert_error_body(response, 403, ErrorCode.INSUFFICIENT_SCOPE)
    anonymous = await service.http.get(f"{BASE}/link-payment", params=window(), headers=tx())
    assert_error_body(anonymous, 401, ErrorCode.UNAUTHENTICATED)


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
                await links_service.prune_idempotency_keys(
                    session, now=long_ago + timedelta(hours=36), batch_size=5
                )
            )
            await session.commit()
    assert pruned == [5, 5, 2, 0]
    async with private_database.session() as session:
        left = await session.execute(text("SELECT count(*) FROM payment_link_idempotency_keys"))
    assert left.scalar() == 1
