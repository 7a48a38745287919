"""B2 and B4 over HTTP on each database: the list, its filters and sorts, and the report (once
read from the service itself, to step between its statements)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text

from tests.support.payment_links import (
    BASE,
    CNPJ,
    CPF,
    LINK_FIELDS,
    cancel,
    create,
    listing,
    pay,
    refund,
    tx,
    window,
)
from tests.support.service import EMPTY_PAGE, Merchant, RunningService, assert_error_body
from tucano.core.clock import clock, format_utc
from tucano.core.errors import ErrorCode
from tucano.db.database import Database
from tucano.payment_links import listing_repository
from tucano.payment_links import service as payment_links
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX
from tucano.payment_links.filters import LinkFilters
from tucano.refunds.service import run_due_refunds

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
    monkeypatch.setattr(listing_repository, "DEEP_OFFSET", deep)
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


async def test_status_sorts_by_its_code(service: RunningService, merchant: Merchant) -> None:
    # By code (1 CREATED, 2 PAID, 3 EXPIRED, 4 CANCELLED, 5 REFUNDED), not alphabetically.
    with clock.freeze(clock.now() - timedelta(days=30)):
        await create(merchant, payerName="Expired", expirationDays=1)
    made = {name: (await create(merchant, payerName=name))["linkPaymentUuid"] for name in (
        "Refunded", "Cancelled", "Paid", "Created"
    )}  # fmt: skip
    for paid in ("Paid", "Refunded"):
        await pay(service, merchant, made[paid], METHOD_PIX if paid == "Paid" else METHOD_CARD)
    await refund(merchant, made["Refunded"])
    await cancel(merchant, made["Cancelled"])

    async def codes(direction: str) -> list[tuple[int, str]]:
        page = await listing(merchant, sort=f"status,{direction}")
        return [(link["status"]["code"], link["payerName"]) for link in page["content"]]

    in_order = [(1, "Created"), (2, "Paid"), (3, "Expired"), (4, "Cancelled"), (5, "Refunded")]
    assert await codes("asc") == in_order
    assert await codes("desc") == in_order[::-1]


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
        await database.dispose()  # connections opened afterwards see the new collation

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


@pytest.mark.parametrize("path", ["/link-payment", "/report"])
async def test_a_registration_number_filter_with_odd_characters_is_refused(
    merchant: Merchant, path: str
) -> None:
    days = {"startDate": "2026-01-01", "endDate": "2026-12-31"}
    for odd in ("529\n98224725", "RN3QNL\u00dfNOPY55"):
        response = await merchant.get(
            f"{BASE}{path}", params={**days, "registrationNumber": odd}, headers=tx()
        )
        error = assert_error_body(response, 400, ErrorCode.INVALID_PARAMETERS)
        assert error["errors"] == [
            "registrationNumber must be written in ASCII digits and letters, with only dots, "
            "dashes, slashes or spaces between them"
        ]


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
        "refundedAmount",
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
        "CANCELLED": (0, Decimal("0")),
        "REFUNDED": (0, Decimal("0")),
    }
    assert report["refundedAmount"] == 0.0
    assert report["byPaymentMethod"] == [
        {"paymentMethod": 1, "count": 0, "amount": 0.0, "refundedAmount": 0.0},
        {"paymentMethod": 2, "count": 0, "amount": 0.0, "refundedAmount": 0.0},
    ]
    days = report["byDay"]
    assert [d["count"] for d in days] == [1, 2]
    assert days[0]["date"] < days[1]["date"] and len(days[0]["date"]) == 10
    only_expired = (
        await merchant.get(f"{BASE}/report", params=window(status="EXPIRED"), headers=tx())
    ).json()
    assert only_expired["totalCount"] == 1


async def test_cancelled_and_refunded_links_are_listed_and_reported_as_such(
    service: RunningService, merchant: Merchant
) -> None:
    await create(merchant, payerName="Open", amount=Decimal("10.00"))
    made = {
        name: (await create(merchant, payerName=name, amount=Decimal(amount)))["linkPaymentUuid"]
        for name, amount in (
            ("Cancelled", "20.00"),
            ("Refunded", "100.00"),
            ("Part", "50.00"),
            ("Pending", "40.00"),
        )
    }
    await cancel(merchant, made["Cancelled"])
    for name, method in (("Refunded", METHOD_CARD), ("Part", METHOD_CARD), ("Pending", METHOD_PIX)):
        await pay(service, merchant, made[name], method)
    await refund(merchant, made["Refunded"])
    await refund(merchant, made["Part"], amount=Decimal("20.00"))  # in part: still PAID
    assert (await refund(merchant, made["Part"], amount=Decimal("5.13")))["status"] == "FAILED"
    # The sandbox's Pix refunds stay PENDING for a while: nothing given back yet.
    assert (await refund(merchant, made["Pending"], amount=15))["status"] == "PENDING"

    async def report(**params: Any) -> dict[str, Any]:
        response = await merchant.get(f"{BASE}/report", params=params, headers=tx())
        assert response.status_code == 200, response.text
        return dict(response.json())

    now = clock.now()
    # Whole days (from the day totals), and part of today (link by link).
    ranges = [
        window(),
        {"startDate": format_utc(now - timedelta(hours=1)), "endDate": format_utc(now)},
    ]
    for dates in ranges:
        everything = await report(**dates)
        assert (everything["totalCount"], everything["totalAmount"]) == (5, 220.0), dates
        assert everything["refundedAmount"] == 120.0
        assert {
            s["status"]: (s["count"], s["amount"], s["refundedAmount"])
            for s in everything["byStatus"]
        } == {
            "CREATED": (1, 10.0, 0.0),
            "PAID": (2, 90.0, 20.0),
            "EXPIRED": (0, 0.0, 0.0),
            "CANCELLED": (1, 20.0, 0.0),
            "REFUNDED": (1, 100.0, 100.0),
        }, dates
        # A refunded link is still counted under the method it was paid by.
        assert everything["byPaymentMethod"] == [
            {"paymentMethod": 1, "count": 2, "amount": 150.0, "refundedAmount": 120.0},
            {"paymentMethod": 2, "count": 1, "amount": 40.0, "refundedAmount": 0.0},
        ], dates
        for status, name, refunded in (
            ("CANCELLED", "Cancelled", 0.0),
            ("REFUNDED", "Refunded", 100.0),
        ):
            listed = await listing(merchant, status=status, **dates)
            assert [link["payerName"] for link in listed["content"]] == [name], dates
            assert listed["totalElements"] == 1
            only = await report(status=status, **dates)
            assert (only["totalCount"], only["refundedAmount"]) == (1, refunded), dates
        by_card = await report(status="REFUNDED", paymentMethod=1, **dates)
        assert by_card["totalCount"] == 1 and by_card["byPaymentMethod"][0]["count"] == 1
        assert (await report(status="REFUNDED", paymentMethod=2, **dates))["totalCount"] == 0


async def test_a_refund_ending_while_a_report_is_read_shows_in_all_of_it_or_none(
    service: RunningService, merchant: Merchant
) -> None:
    # On PostgreSQL each statement of a read sees the database at its own moment: a report
    # whose counts and refunded sums came from two could count a link as PAID and its refund
    # under REFUNDED. Read from the service, to end the refund right after its first statement.
    link = (await create(merchant, amount=Decimal("40.00")))["linkPaymentUuid"]
    await pay(service, merchant, link, METHOD_PIX)
    assert (await refund(merchant, link))["status"] == "PENDING"  # until the sandbox settles it
    database = service.database
    async with database.read_session() as session:
        execute = session.execute
        settled: list[int] = []

        async def execute_then_settle(*args: Any, **kwargs: Any) -> Any:
            result = await execute(*args, **kwargs)
            if not settled:
                with clock.freeze(clock.now() + timedelta(seconds=6)):
                    settled.append(await run_due_refunds(database, service.app.state.refunder))
            return result

        session.execute = execute_then_settle  # type: ignore[method-assign]
        report = await payment_links.report(
            session,
            customer_id=merchant.customer_id,
            filters=LinkFilters(start=clock.now() - timedelta(days=1), end=clock.now()),
        )
    assert settled and settled[0] >= 1
    refunds = await merchant.get(f"{BASE}/{link}/refunds", headers=tx())
    assert refunds.json()[0]["status"] == "SUCCEEDED"
    shown = {
        s["status"]: (s["count"], s["amount"], s["refunded_amount"])
        for s in report["by_status"]
        if s["count"] or s["refunded_amount"]
    }
    before = {"PAID": (1, Decimal("40.00"), Decimal("0"))}
    after = {"REFUNDED": (1, Decimal("40.00"), Decimal("40.00"))}
    assert shown in (before, after)
    assert report["refunded_amount"] == sum(s[2] for s in shown.values())


async def test_by_day_counts_a_link_on_its_creation_day_in_brasilia(merchant: Merchant) -> None:
    # 23:30 on 31 December 2025 in Brasília is 02:30 on 1 January 2026 in UTC: December's sale,
    # and 2025's, read from the day totals (a whole range) or link by link (part of a day).
    with clock.freeze(datetime(2026, 1, 1, 2, 30, tzinfo=UTC)):
        await create(merchant, amount=Decimal("10.00"))
    for params in (window(), {"startDate": "2026-01-01", "endDate": "2026-01-01"}):
        response = await merchant.get(f"{BASE}/report", params=params, headers=tx())
        assert response.json()["byDay"] == [{"date": "2025-12-31", "count": 1, "amount": 10.0}], (
            params
        )


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
