"""The schema is made only by the migrations: upgrade from empty, down to nothing, up again, and
the result matches the models exactly (no drift between ORM and migrations)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import uuid as uuid_module
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests.support.databases import drop_scratch_database
from tests.support.settings import (
    POSTGRES_URL,
    TEST_SECRET_KEY,
    TEST_SECRET_STORE,
    database_params,
    fresh_database_url,
)
from tucano.core.secret_box import SecretBoxError
from tucano.migrations import downgrade, upgrade
from tucano.migrations.registry import metadata
from tucano.webhooks.secret_store import WebhookSecretStore
from tucano.webhooks.signing import signing_secrets


@pytest.fixture(params=database_params())
async def empty_database(request: pytest.FixtureRequest, tmp_root: Path) -> AsyncIterator[str]:
    url = await fresh_database_url(request.param, tmp_root)
    yield url
    if request.param == "postgresql":
        await drop_scratch_database(POSTGRES_URL, url)


async def tables_and_drift(url: str) -> tuple[set[str], list[object]]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:

            def read(sync_connection: object) -> tuple[set[str], list[object]]:
                tables = set(inspect(sync_connection).get_table_names())  # type: ignore[arg-type]
                context = MigrationContext.configure(
                    sync_connection,  # type: ignore[arg-type]
                    opts={"compare_type": True},
                )
                return tables, list(compare_metadata(context, metadata))

            return await connection.run_sync(read)
    finally:
        await engine.dispose()


async def test_upgrade_downgrade_upgrade(empty_database: str) -> None:
    await asyncio.to_thread(upgrade, empty_database)
    tables, drift = await tables_and_drift(empty_database)
    assert set(metadata.tables) <= tables
    assert drift == []

    await asyncio.to_thread(downgrade, empty_database, "base")
    tables, _ = await tables_and_drift(empty_database)
    assert tables <= {"alembic_version"}

    await asyncio.to_thread(upgrade, empty_database)
    tables, drift = await tables_and_drift(empty_database)
    assert set(metadata.tables) <= tables
    assert drift == []


async def test_upgrade_twice_is_a_no_op(empty_database: str) -> None:
    await asyncio.to_thread(upgrade, empty_database)
    await asyncio.to_thread(upgrade, empty_database)
    _, drift = await tables_and_drift(empty_database)
    assert drift == []


def _sqlite_file(url: str) -> str:
    return url.removeprefix("sqlite+aiosqlite:///")


async def test_sqlite_ids_deleted_before_the_upgrade_are_never_given_again(tmp_root: Path) -> None:
    """0006: rows keep their ids and indexes, and a new row's id is above every id the table ever
    gave, including one only the results history still remembers."""
    url = await fresh_database_url("sqlite", tmp_root)
    await asyncio.to_thread(upgrade, url, "0005_payment_link_day_totals")
    database = sqlite3.connect(_sqlite_file(url))
    now = "2026-11-23 10:00:00.000000"
    with database:
        for webhook_id in (1, 2, 3):
            database.execute(
                "INSERT INTO webhooks (id, customer_id, target_url, event_type, is_active, secret,"
                " created_at, updated_at) VALUES (?, 10, 'https://example.com/h', 'PIX_INBOUND',"
                " 1, 'whsec_x', ?, ?)",
                (webhook_id, now, now),
            )
        database.execute("DELETE FROM webhooks WHERE id = 3")
        # Webhook 7 was deleted long ago; only its delivery results are left.
        database.execute(
            "INSERT INTO delivery_results (id, delivery_id, customer_id, webhook_id, event_id,"
            " event_type, target_url, attempt, status, duration_ms, attempted_at)"
            " VALUES (1, 40, 10, 7, 'evt', 'PIX_INBOUND', 'https://example.com/h', 1, 'SUCCESS',"
            " 5, ?)",
            (now,),
        )
    database.close()

    await asyncio.to_thread(upgrade, url)

    database = sqlite3.connect(_sqlite_file(url))
    with database:
        assert [row[0] for row in database.execute("SELECT id FROM webhooks ORDER BY id")] == [1, 2]
        new_webhook = database.execute(
            "INSERT INTO webhooks (customer_id, target_url, event_type, is_active, secret,"
            " created_at, updated_at) VALUES (11, 'https://example.com/h', 'PIX_INBOUND', 1,"
            " 'whsec_y', ?, ?)",
            (now, now),
        ).lastrowid
        new_delivery = database.execute(
            "INSERT INTO deliveries (event_id, webhook_id, customer_id, attempts, next_attempt_at,"
            " created_at, updated_at) VALUES ('evt', 1, 10, 0, ?, ?, ?)",
            (now, now, now),
        ).lastrowid
        indexes = {
            name: sql
            for name, sql in database.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            )
        }
    database.close()
    assert new_webhook == 8
    assert new_delivery == 41
    assert "WHERE autopay_at IS NOT NULL" in indexes["ix_payment_links_autopay"]
    assert "WHERE attempts = 0" in indexes["ix_deliveries_due_first"]
    _, drift = await tables_and_drift(url)
    assert drift == []


async def test_deliveries_held_at_the_upgrade_stay_held_until_their_lease_ends(
    tmp_root: Path,
) -> None:
    """0007: a claim used to push next_attempt_at to the lease's end; that end becomes the
    delivery's lease_until, and a delivery nobody held has none."""
    url = await fresh_database_url("sqlite", tmp_root)
    await asyncio.to_thread(upgrade, url, "0006_sqlite_ids_never_reused")
    database = sqlite3.connect(_sqlite_file(url))
    now, lease_end = "2026-11-23 10:00:00.000000", "2026-11-23 10:01:00.000000"
    with database:
        database.execute(
            "INSERT INTO webhooks (id, customer_id, target_url, event_type, is_active, secret,"
            " created_at, updated_at) VALUES (1, 10, 'https://example.com/h', 'PIX_INBOUND',"
            " 1, 'whsec_x', ?, ?)",
            (now, now),
        )
        database.execute(
            "INSERT INTO events (id, customer_id, event_type, payload, created_at)"
            " VALUES ('evt', 10, 'PIX_INBOUND', '{}', ?)",
            (now,),
        )
        for delivery_id, due, token in ((1, lease_end, "held"), (2, now, None)):
            database.execute(
                "INSERT INTO deliveries (id, event_id, webhook_id, customer_id, attempts,"
                " next_attempt_at, claim_token, created_at, updated_at)"
                " VALUES (?, 'evt', 1, 10, 0, ?, ?, ?, ?)",
                (delivery_id, due, token, now, now),
            )
    database.close()

    await asyncio.to_thread(upgrade, url)

    rows = _rows(url, "SELECT id, lease_until FROM deliveries ORDER BY id")
    assert rows == [(1, lease_end), (2, None)]


async def test_a_previous_secret_in_its_grace_is_carried_over(tmp_root: Path) -> None:
    """0008: the one previous secret becomes the list of replaced secrets, if still live."""
    url = await fresh_database_url("sqlite", tmp_root)
    await asyncio.to_thread(upgrade, url, "0007_delivery_leases")
    database = sqlite3.connect(_sqlite_file(url))
    now = datetime.now(UTC).replace(tzinfo=None)
    live = (now + timedelta(hours=3)).replace(microsecond=123000)
    gone = now - timedelta(hours=1)
    with database:
        for webhook_id, previous, until in (
            (1, "whsec_live", live),
            (2, "whsec_gone", gone),
            (3, None, None),
        ):
            database.execute(
                "INSERT INTO webhooks (id, customer_id, target_url, event_type, is_active, secret,"
                " previous_secret, previous_secret_expires_at, created_at, updated_at)"
                " VALUES (?, 10, 'https://example.com/h', 'PIX_OUTBOUND', 1, 'whsec_now', ?, ?,"
                " ?, ?)",
                (
                    webhook_id,
                    previous,
                    until and until.isoformat(" "),
                    now.isoformat(" "),
                    now.isoformat(" "),
                ),
            )
    database.close()

    await asyncio.to_thread(upgrade, url, "0008_previous_secrets")  # 0016 seals them after

    rows = _rows(url, "SELECT id, previous_secrets FROM webhooks ORDER BY id")
    expected = [["whsec_live", live.strftime("%Y-%m-%dT%H:%M:%S.123Z")]]
    assert rows == [(1, json.dumps(expected)), (2, None), (3, None)]
    assert signing_secrets("whsec_now", rows[0][1], now=datetime.now(UTC)) == (
        "whsec_now",
        "whsec_live",
    )
    await asyncio.to_thread(upgrade, url)
    _, drift = await tables_and_drift(url)
    assert drift == []


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    """What `sql` reads from the SQLite database at `url`, straight through the driver."""
    database = sqlite3.connect(_sqlite_file(url))
    try:
        return database.execute(sql).fetchall()
    finally:
        database.close()


def _insert_result(
    database: sqlite3.Connection,
    delivery_id: int,
    attempted_at: str,
    *,
    webhook_id: int = 1,
    status: str = "SUCCESS",
) -> None:
    """A result of customer 7, written as the SQLite text it is stored as."""
    database.execute(
        "INSERT INTO delivery_results (delivery_id, customer_id, webhook_id, event_id,"
        " event_type, target_url, attempt, status, duration_ms, attempted_at)"
        " VALUES (?, 7, ?, 'evt_x', 'PIX_OUTBOUND', 'https://example.com/h', 1, ?, 5, ?)",
        (delivery_id, webhook_id, status, attempted_at),
    )


async def test_results_recorded_before_the_upgrade_are_counted(tmp_root: Path) -> None:
    """0009: the hour counts start from the results already there."""
    url = await fresh_database_url("sqlite", tmp_root)
    await asyncio.to_thread(upgrade, url, "0008_previous_secrets")
    database = sqlite3.connect(_sqlite_file(url))
    with database:
        for n, (webhook_id, status, at) in enumerate(
            [
                (1, "SUCCESS", "2026-11-01 10:00:00.000000"),
                (1, "SUCCESS", "2026-11-01 10:59:59.999999"),
                (1, "EXHAUSTED", "2026-11-01 10:30:00.000000"),
                (2, "SUCCESS", "2026-11-01 11:00:00"),  # as the old default adapter wrote it
            ]
        ):
            _insert_result(database, n, at, webhook_id=webhook_id, status=status)
    database.close()

    await asyncio.to_thread(upgrade, url)

    rows = _rows(
        url,
        "SELECT customer_id, hour, webhook_id, status, result_count, folded"
        " FROM delivery_result_counts ORDER BY hour, webhook_id, status",
    )
    ten = int(datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()) // 3600
    assert rows == [
        (7, ten, 1, "EXHAUSTED", 1, 1),
        (7, ten, 1, "SUCCESS", 2, 1),
        (7, ten + 1, 2, "SUCCESS", 1, 1),
    ]
    _, drift = await tables_and_drift(url)
    assert drift == []


async def test_sqlite_timestamps_at_a_whole_second_get_their_fraction(tmp_root: Path) -> None:
    """0010: the one text format for every timestamp, whole seconds included."""
    url = await fresh_database_url("sqlite", tmp_root)
    await asyncio.to_thread(upgrade, url, "0009_delivery_result_counts")
    database = sqlite3.connect(_sqlite_file(url))
    with database:
        for n, at in enumerate(["2026-11-01 11:00:00", "2026-11-01 11:00:00.250000"]):
            _insert_result(database, n, at)
    database.close()

    await asyncio.to_thread(upgrade, url)

    stored = _rows(url, "SELECT attempted_at FROM delivery_results ORDER BY id")
    assert stored == [("2026-11-01 11:00:00.000000",), ("2026-11-01 11:00:00.250000",)]


async def test_cancelled_results_left_uncounted_are_counted(tmp_root: Path) -> None:
    """0011: results recorded without their hour counts (deliveries cancelled with their
    webhook, before the fix) are counted; those already counted are not counted twice."""
    url = await fresh_database_url("sqlite", tmp_root)
    await asyncio.to_thread(upgrade, url, "0010_sqlite_whole_seconds")
    database = sqlite3.connect(_sqlite_file(url))
    with database:
        _insert_result(database, 1, "2026-11-01 10:00:00.000000")
        hour = int(datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()) // 3600
        database.execute(
            "INSERT INTO delivery_result_counts (customer_id, hour, webhook_id, event_type,"
            " status, result_count, folded) VALUES (7, ?, 1, 'PIX_OUTBOUND', 'SUCCESS', 1, 0)",
            (hour,),
        )
        _insert_result(database, 2, "2026-11-01 10:20:00.000000", status="FAILED")  # uncounted
    database.close()

    await asyncio.to_thread(upgrade, url)

    rows = _rows(
        url,
        "SELECT status, sum(result_count) FROM delivery_result_counts"
        " WHERE customer_id = 7 GROUP BY status ORDER BY status",
    )
    assert rows == [("FAILED", 1), ("SUCCESS", 1)]


async def test_links_made_before_the_checkout_get_a_txid_of_their_own(empty_database: str) -> None:
    """0015: every link already there gets the txid its BR Code carries, each its own."""
    await asyncio.to_thread(upgrade, empty_database, "0014_cancelled_deliveries")
    engine = create_async_engine(empty_database, poolclass=NullPool)
    try:
        async with engine.begin() as connection:
            for n in range(3):
                await connection.execute(
                    text(
                        "INSERT INTO payment_links (uuid, customer_id, payer_name,"
                        " registration_number, amount_cents, numbers_installments,"
                        " expiration_days, verification_token, status, created_at, expires_at)"
                        " VALUES (:uuid, 7, 'Maria', '52998224725', 1000, 1, 1, 123456,"
                        " 'CREATED', :at, :at)"
                    ),
                    {
                        "uuid": uuid_module.uuid4().hex
                        if "sqlite" in empty_database
                        else uuid_module.uuid4(),
                        "at": datetime(2026, 11, 30, 10, n, tzinfo=UTC)
                        if "postgresql" in empty_database
                        else f"2026-11-30 10:0{n}:00.000000",
                    },
                )
        await asyncio.to_thread(upgrade, empty_database)
        async with engine.connect() as connection:
            txids = (await connection.execute(text("SELECT pix_txid FROM payment_links"))).scalars()
            found = list(txids)
    finally:
        await engine.dispose()
    assert len(found) == 3 == len(set(found))
    assert all(re.fullmatch(r"[A-Za-z0-9]{1,25}", txid) for txid in found), found
    _, drift = await tables_and_drift(empty_database)
    assert drift == []


async def _webhooks_at_0015(url: str, rows: list[tuple[int, str, str | None]]) -> None:
    """Webhooks (id, secret, previous_secrets) as the release before 0016 stored them."""
    await asyncio.to_thread(upgrade, url, "0015_checkout")
    engine = create_async_engine(url, poolclass=NullPool)
    at: object = (
        datetime(2026, 12, 1, 10, tzinfo=UTC)
        if "postgresql" in url
        else "2026-12-01 10:00:00.000000"
    )
    try:
        async with engine.begin() as connection:
            for webhook_id, secret, previous in rows:
                await connection.execute(
                    text(
                        "INSERT INTO webhooks (id, customer_id, target_url, event_type, is_active,"
                        " secret, previous_secrets, created_at, updated_at) VALUES (:id, 10,"
                        " 'https://example.com/h', 'PIX_OUTBOUND', true, :secret, :previous,"
                        " :at, :at)"
                    ),
                    {"id": webhook_id, "secret": secret, "previous": previous, "at": at},
                )
    finally:
        await engine.dispose()


async def _stored_secrets(url: str) -> list[tuple[int, str, str | None]]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT id, secret, previous_secrets FROM webhooks ORDER BY id")
            )
            return [(row[0], row[1], row[2]) for row in rows]
    finally:
        await engine.dispose()


async def test_secrets_stored_before_the_upgrade_are_sealed(empty_database: str) -> None:
    """0016: every webhook's secrets are sealed under TUCANO_SECRET_KEY, each bound to its row;
    the downgrade opens them again."""
    previous = json.dumps([["whsec_replaced", "2099-01-01T00:00:00.000Z"]])
    before = [(1, "whsec_current1", previous), (2, "whsec_current2", None)]
    await _webhooks_at_0015(empty_database, before)

    await asyncio.to_thread(upgrade, empty_database, secret_key=TEST_SECRET_KEY)

    sealed = await _stored_secrets(empty_database)
    for (webhook_id, secret, stored_previous), (_, plain, plain_previous) in zip(
        sealed, before, strict=True
    ):
        assert secret.startswith("v1:") and "whsec_" not in secret
        assert stored_previous is None or "whsec_" not in stored_previous
        assert TEST_SECRET_STORE.signing_secrets(
            webhook_id, secret, stored_previous, now=datetime.now(UTC)
        ) == (plain, *(["whsec_replaced"] if plain_previous else []))
    # Bound to its row: webhook 1's value does not open as webhook 2's.
    with pytest.raises(SecretBoxError):
        TEST_SECRET_STORE.signing_secrets(2, sealed[0][1], None, now=datetime.now(UTC))
    _, drift = await tables_and_drift(empty_database)
    assert drift == []

    await asyncio.to_thread(downgrade, empty_database, "0015_checkout", secret_key=TEST_SECRET_KEY)
    assert await _stored_secrets(empty_database) == before


async def test_without_a_secret_key_the_upgrade_seals_under_the_sandbox_key(
    tmp_root: Path,
) -> None:
    """0016 in sandbox without TUCANO_SECRET_KEY: the key the service would generate, made and
    kept in instance_secrets, so the service then opens what the migration sealed."""
    url = await fresh_database_url("sqlite", tmp_root)
    await _webhooks_at_0015(url, [(1, "whsec_sandbox", None)])

    await asyncio.to_thread(upgrade, url)

    [(value,)] = _rows(url, "SELECT value FROM instance_secrets WHERE name = 'secret_key'")
    [(_, secret, _)] = await _stored_secrets(url)
    assert "whsec_" not in secret
    store = WebhookSecretStore(str(value).encode())
    assert store.signing_secrets(1, secret, None, now=datetime.now(UTC)) == ("whsec_sandbox",)


async def test_day_totals_are_counted_again_by_the_brasilia_day(empty_database: str) -> None:
    """0017: a link created at 23:30 on 31 December in Brasília (02:30 UTC on 1 January) is
    counted on 31 December; the downgrade counts it on the UTC day again."""
    await asyncio.to_thread(upgrade, empty_database, "0016_secrets_at_rest")
    postgresql = "postgresql" in empty_database
    engine = create_async_engine(empty_database, poolclass=NullPool)
    at = datetime(2027, 1, 1, 2, 30, tzinfo=UTC)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO payment_links (uuid, customer_id, payer_name,"
                    " registration_number, amount_cents, numbers_installments,"
                    " expiration_days, verification_token, status, created_at, expires_at,"
                    " pix_txid) VALUES (:uuid, 7, 'Maria', '52998224725', 1000, 1, 1, 123456,"
                    " 'CREATED', :at, :at, 'abc123')"
                ),
                {
                    "uuid": uuid_module.uuid4() if postgresql else uuid_module.uuid4().hex,
                    "at": at if postgresql else "2027-01-01 02:30:00.000000",
                },
            )
            # As the earlier release recorded it: a change keyed by the UTC day.
            await connection.execute(
                text(
                    "INSERT INTO payment_link_day_changes (customer_id, day, expiration_days,"
                    " status, payment_method, link_count, amount_cents)"
                    " VALUES (7, :day, 1, 'CREATED', 0, 1, 1000)"
                ),
                {"day": at.date() if postgresql else "2027-01-01"},
            )

        async def days() -> list[tuple[str, int]]:
            async with engine.connect() as connection:
                rows = await connection.execute(
                    text(
                        "SELECT day, link_count FROM payment_link_day_totals UNION ALL"
                        " SELECT day, link_count FROM payment_link_day_changes"
                    )
                )
                return [(str(day), count) for day, count in rows]

        await asyncio.to_thread(upgrade, empty_database)
        assert await days() == [("2026-12-31", 1)]
        await asyncio.to_thread(downgrade, empty_database, "0016_secrets_at_rest")
        assert await days() == [("2027-01-01", 1)]
    finally:
        await engine.dispose()


async def test_links_keep_their_payments_and_expired_ones_count_as_announced(
    empty_database: str,
) -> None:
    """0019: rebuilding payment_links (on SQLite) keeps every link and the payments that refer
    to them; a link expired before the upgrade sends no EXPIRED event days late, one still open
    will."""
    await asyncio.to_thread(upgrade, empty_database, "0018_pix_charges")
    postgresql = "postgresql" in empty_database
    engine = create_async_engine(empty_database, poolclass=NullPool)
    now = datetime.now(UTC)

    def moment(at: datetime) -> object:
        return at if postgresql else at.replace(tzinfo=None).isoformat(" ", "microseconds")

    try:
        async with engine.begin() as connection:
            for link_id, (txid, expires) in enumerate(
                [("past", now - timedelta(days=1)), ("open", now + timedelta(days=1))], start=1
            ):
                await connection.execute(
                    text(
                        "INSERT INTO payment_links (id, uuid, customer_id, payer_name,"
                        " registration_number, amount_cents, numbers_installments,"
                        " expiration_days, verification_token, status, created_at, expires_at,"
                        " pix_txid) VALUES (:id, :uuid, 7, 'Maria', '52998224725', 1000, 1, 2,"
                        " 123456, :status, :created, :expires, :txid)"
                    ),
                    {
                        "id": link_id,
                        "uuid": uuid_module.uuid4() if postgresql else uuid_module.uuid4().hex,
                        "status": "CREATED",
                        "created": moment(expires - timedelta(days=2)),
                        "expires": moment(expires),
                        "txid": txid,
                    },
                )
            await connection.execute(
                text(
                    "INSERT INTO payment_link_payments (link_id, customer_id, method, payment_id,"
                    " payment_receipt, installments, amount_cents, paid_at)"
                    " VALUES (2, 7, 1, 'pay_1', '123456', 1, 1000, :paid)"
                ),
                {"paid": moment(now)},
            )
        await asyncio.to_thread(upgrade, empty_database)
        async with engine.connect() as connection:
            links = (
                await connection.execute(
                    text(
                        "SELECT pix_txid, expiry_announced_at IS NOT NULL, refunded_cents,"
                        " refund_count FROM payment_links ORDER BY id"
                    )
                )
            ).all()
            payments = (
                await connection.execute(text("SELECT link_id FROM payment_link_payments"))
            ).all()
        assert [tuple(row) for row in links] == [("past", True, 0, 0), ("open", False, 0, 0)]
        assert [row[0] for row in payments] == [2]
    finally:
        await engine.dispose()
