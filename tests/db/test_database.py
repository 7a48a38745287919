"""The Database of a process: its sessions on SQLite (one writer, readers that never wait for
it), its PostgreSQL connections, and outages answered 503 rather than 500."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import make_url, text

from tests.support.payment_links import create
from tests.support.service import RunningService, assert_error_body, start_service
from tests.support.settings import POSTGRES_URL, make_settings
from tucano.core.errors import ErrorCode
from tucano.db.coalesced import CoalescedLookup
from tucano.db.database import Database

needs_postgres = pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")


@pytest.fixture
async def sqlite_database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    async with database.session() as session:
        await session.execute(text("CREATE TABLE notes (body TEXT NOT NULL)"))
        await session.commit()
    yield database
    await database.dispose()


async def _bodies(database: Database) -> list[str]:
    async with database.read_session() as session:
        return list(await session.scalars(text("SELECT body FROM notes ORDER BY body")))


async def test_work_left_unfinished_is_rolled_back_and_holds_no_lock(
    sqlite_database: Database,
) -> None:
    # A session closed without a commit (a request that failed half way) must not leak its
    # writes, nor SQLite's write lock, into the next user of its connection.
    async with sqlite_database.session() as session:
        await session.execute(text("INSERT INTO notes VALUES ('never committed')"))
    async with sqlite_database.session() as session:
        await session.execute(text("INSERT INTO notes VALUES ('next')"))
        await session.commit()
    assert await _bodies(sqlite_database) == ["next"]


async def test_a_request_cancelled_while_waiting_for_the_sqlite_lock_leaves_it_free(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    database = Database(f"sqlite+aiosqlite:///{path}")
    async with database.session() as session:
        await session.execute(text("CREATE TABLE notes (body TEXT NOT NULL)"))
        await session.commit()
    other_process = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        other_process.execute("BEGIN IMMEDIATE")  # holds the write lock

        async def write(body: str) -> None:
            async with database.session() as session:
                await session.execute(text("INSERT INTO notes VALUES (:b)"), {"b": body})
                await session.commit()

        waiting = asyncio.create_task(write("cancelled"))
        await asyncio.sleep(0.3)  # its BEGIN IMMEDIATE waits in SQLite's busy handler
        waiting.cancel()
        await asyncio.sleep(0.1)  # the cancelled request returns its connection meanwhile
        other_process.execute("COMMIT")  # the lock frees: the queued BEGIN runs now
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # This process must not hold the lock now, nor be left inside a transaction.
        other_process.execute("BEGIN IMMEDIATE")
        other_process.execute("INSERT INTO notes VALUES ('other process')")
        other_process.execute("COMMIT")
        await write("next")
        assert await _bodies(database) == ["next", "other process"]
    finally:
        other_process.close()
        await database.dispose()


async def test_sqlite_reads_go_on_while_another_process_holds_the_write_lock(
    sqlite_database: Database, tmp_path: Path
) -> None:
    # (Found by the fuzz audit: reads took the write lock too, and waited behind any writer.)
    async with sqlite_database.session() as session:
        await session.execute(text("INSERT INTO notes VALUES ('before')"))
        await session.commit()
    other_process = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None, timeout=5)
    try:
        other_process.execute("BEGIN IMMEDIATE")  # holds the write lock
        other_process.execute("INSERT INTO notes VALUES ('uncommitted')")

        async def read() -> list[str]:
            async with sqlite_database.read_session() as session:
                return list(await session.scalars(text("SELECT body FROM notes")))

        # Several at once, each answered from the last committed state, without waiting.
        answers = await asyncio.wait_for(asyncio.gather(*(read() for _ in range(8))), 2)
        assert answers == [["before"]] * 8
        other_process.execute("COMMIT")
        assert sorted(await read()) == ["before", "uncommitted"]
    finally:
        other_process.close()


async def test_a_sqlite_read_session_cannot_write(sqlite_database: Database) -> None:
    # A read that wrote would turn its snapshot into a writer, which SQLite may refuse at once;
    # the read connections refuse every write instead, so no such code passes the tests.
    async with sqlite_database.read_session() as session:
        with pytest.raises(Exception, match="readonly"):
            await session.execute(text("INSERT INTO notes VALUES ('x')"))


@pytest.mark.postgres
@needs_postgres
async def test_no_session_compiles_statements_just_in_time() -> None:
    """JIT compilation cost a claim of the delivery queue 35-70 ms when its estimate crossed
    jit_above_cost; every kind of connection turns it off (with a SET once connected: PgBouncer
    refuses it as a startup parameter)."""
    database = Database(POSTGRES_URL, pool_size=1)
    try:
        async with database.session() as session:
            assert (await session.execute(text("SHOW jit"))).scalar() == "off"
        for _ in range(2):  # and still after a return to the pool
            async with database.read_session() as session:
                assert (await session.execute(text("SHOW jit"))).scalar() == "off"
        async with database.session() as session:
            assert (await session.execute(text("SHOW jit"))).scalar() == "off"
    finally:
        await database.dispose()


async def _terminate_sessions(database_url: str, *, running: str | None = None) -> int:
    """End Tucano's sessions on the database, as an administrator or a failover would (only
    those running a statement like `running`, if given)."""
    from tucano.db.engines import connect_asyncpg

    admin = await connect_asyncpg(database_url)
    try:
        found = await admin.fetchval(
            "SELECT array_agg(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND ($1::text IS NULL OR query LIKE $1)",
            running,
        )
        ended = [
            pid
            for pid in found or []
            if await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        ]
        # pg_terminate_backend only signals: wait until those backends have exited, so their
        # sockets are closed by the time the caller goes on (a loaded machine takes a while).
        for _ in range(200):
            if not await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", ended
            ):
                break
            await asyncio.sleep(0.05)
        return len(ended)
    finally:
        await admin.close()


@pytest.fixture
async def postgres_service(private_database: Database) -> AsyncIterator[RunningService]:
    """A service on PostgreSQL, whose connections can be terminated from outside."""
    if private_database.dialect != "postgresql":
        pytest.skip("PostgreSQL: its connections can be terminated from outside")
    running = await start_service(make_settings(private_database.url), private_database)
    yield running
    await running.stop()


async def test_pooled_connections_the_server_closed_are_replaced_unseen(
    private_database: Database, postgres_service: RunningService
) -> None:
    running = postgres_service
    merchant = await running.merchant()
    link = await create(merchant)
    read_link = f"/payment-link/v1/{link['linkPaymentUuid']}"
    requests = [("/webhook/v1/list", {}), (read_link, {"x-transaction-id": str(uuid4())})]
    for path, headers in requests * 4:  # every kind of pool holds a few connections
        assert (await merchant.get(path, headers=headers)).status_code == 200
    assert (await running.http.get("/health")).status_code == 200
    # An administrator (or a failover) ends every connection while they are idle.
    assert await _terminate_sessions(private_database.url) > 0
    await asyncio.sleep(0.2)
    statuses = [(await running.http.get("/health")).status_code]
    for path, headers in requests * 6:
        headers = {**headers, "x-transaction-id": str(uuid4())} if headers else {}
        statuses.append((await merchant.get(path, headers=headers)).status_code)
    assert set(statuses) == {200}, statuses


async def test_a_connection_lost_mid_request_is_a_503_to_retry_not_a_500(
    private_database: Database, postgres_service: RunningService
) -> None:
    running = postgres_service

    # Statements that are still running when their connection is ended, one per kind of pool.
    @running.app.get("/__slow_session_for_test")
    async def slow_session() -> None:
        async with private_database.session() as session:
            await session.execute(text("SELECT pg_sleep(30) AS slow_session"))

    @running.app.get("/__slow_read_for_test")
    async def slow_read() -> None:
        async with private_database.read_session() as session:
            await session.execute(text("SELECT pg_sleep(30) AS slow_read"))

    try:
        for path in ("/__slow_session_for_test", "/__slow_read_for_test"):
            request = asyncio.create_task(running.http.get(path, timeout=30))
            ended = 0
            while not ended:
                await asyncio.sleep(0.05)
                ended = await _terminate_sessions(private_database.url, running="%pg_sleep(30)%")
            response = await request
            assert_error_body(response, 503, ErrorCode.UNAVAILABLE)
            assert response.headers["retry-after"] == "1"
    finally:
        running.app.router.routes[-2:] = []


async def test_a_server_out_of_connections_is_a_503_to_retry_not_a_500(
    private_database: Database, postgres_service: RunningService
) -> None:
    """As when every process together opens more than `max_connections`: here a role allowed
    none, so that each new connection is refused with PostgreSQL's "too many connections"."""
    from tucano.db.engines import connect_asyncpg

    role = "tucano_test_no_connections"
    admin = await connect_asyncpg(private_database.url)
    try:
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
        url = make_url(private_database.url).set(username=role).render_as_string(False)
        database = Database(url)
        full = await start_service(make_settings(url), database)
        try:
            merchant = await postgres_service.merchant()  # a token the full service accepts
            merchant.service = full
            for path in ("/webhook/v1/list", "/health"):
                response = await merchant.get(path)
                assert_error_body(response, 503, ErrorCode.UNAVAILABLE)
                assert response.headers["retry-after"] == "1"
            # The token endpoint says so the OAuth way, as it answers every error.
            response = await full.http.post(
                "/oauth/v1/token",
                data={"grant_type": "client_credentials", "client_id": "x", "client_secret": "y"},
            )
            assert response.status_code == 503
            assert response.json()["error"] == "temporarily_unavailable"
            assert response.json()["error_description"]
            assert response.headers["retry-after"] == "1"
        finally:
            await full.stop()
            await database.dispose()
    finally:
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


@pytest.mark.parametrize("timeout", ["lock_timeout", "statement_timeout"])
async def test_a_timeout_the_operator_set_is_a_503_to_retry_not_a_500(
    private_database: Database, postgres_service: RunningService, timeout: str
) -> None:
    """Operators bound statements on the role or database (`ALTER ROLE tucano SET
    statement_timeout = '30s'`, or `lock_timeout`); one that runs out is a busy database."""
    from tucano.db.engines import connect_asyncpg

    merchant = await postgres_service.merchant()
    created = await create(merchant)
    database_name = make_url(private_database.url).database
    admin = await connect_asyncpg(private_database.url)
    try:
        await admin.execute(f"ALTER DATABASE {database_name} SET {timeout} = '200ms'")
        database = Database(private_database.url)  # its connections open with the setting
        bounded = await start_service(make_settings(private_database.url), database)
        try:
            merchant.service = bounded
            requests = [
                "/webhook/v1/list",
                f"/payment-link/v1/{created['linkPaymentUuid']}",
                "/payment-link/v1/link-payment?startDate=2020-01-01&endDate=2099-12-31",
            ]
            async with admin.transaction():
                # A migration or a long maintenance holds the tables.
                await admin.execute(
                    "LOCK TABLE webhooks, payment_links, payment_link_day_totals "
                    "IN ACCESS EXCLUSIVE MODE"
                )
                for path in requests:
                    response = await merchant.get(path, headers={"x-transaction-id": str(uuid4())})
                    assert_error_body(response, 503, ErrorCode.UNAVAILABLE)
                    assert response.headers["retry-after"] == "1"
            for path in requests:  # the lock gone, the same requests work
                response = await merchant.get(path, headers={"x-transaction-id": str(uuid4())})
                assert response.status_code == 200, response.text
        finally:
            await bounded.stop()
            await database.dispose()
    finally:
        await admin.execute(f"ALTER DATABASE {database_name} RESET {timeout}")
        await admin.close()


def test_what_counts_as_the_database_unavailable() -> None:
    import asyncpg
    from sqlalchemy import exc as sa

    from tucano.db.outages import is_database_unavailable

    # The server closed the connection as the pool handed it out: the statement was never sent.
    handed_out_closing = asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )
    unavailable = [
        handed_out_closing,
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        sa.TimeoutError("QueuePool limit reached"),
        sqlite3.OperationalError("database is locked"),
        ConnectionRefusedError(111, "Connect call failed"),
        asyncpg.TooManyConnectionsError('too many connections for role "tucano"'),
        asyncpg.QueryCanceledError("canceling statement due to statement timeout"),
        asyncpg.LockNotAvailableError("canceling statement due to lock timeout"),
        asyncpg.ObjectNotInPrerequisiteStateError(
            'database "tucano" is not currently accepting connections'
        ),
    ]
    for error in unavailable:
        assert is_database_unavailable(error), error
    wrapped = RuntimeError("while publishing")
    wrapped.__cause__ = handed_out_closing
    assert is_database_unavailable(wrapped)
    faults = [
        asyncpg.InternalClientError("a bug of ours or the driver's"),
        asyncpg.UniqueViolationError("duplicate key"),
        sqlite3.OperationalError("no such table: links"),
        asyncpg.ObjectNotInPrerequisiteStateError('currval of sequence "s" is not yet defined'),
        asyncpg.OutOfMemoryError("out of shared memory"),  # the same again on a retry
        ValueError("bad"),
    ]
    for error in faults:
        assert not is_database_unavailable(error), error


class _Table:
    """What a CoalescedLookup fetches from in these tests: a dict, each fetch recorded, and
    a gate a test can hold fetches at."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.fetches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.failure: Exception | None = None

    async def fetch_many(self, keys: list[str]) -> dict[str, int]:
        self.fetches.append(keys)
        snapshot = dict(self.values)  # what the statement sees: the table as it starts
        await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return {key: snapshot[key] for key in keys if key in snapshot}


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_a_lone_lookup_runs_at_once_on_its_own() -> None:
    table = _Table()
    table.values = {"a": 1}
    lookup = CoalescedLookup(table.fetch_many, max_in_flight=2)
    assert await lookup.get("a") == 1
    assert await lookup.get("missing") is None
    assert table.fetches == [["a"], ["missing"]]


async def test_lookups_under_load_share_statements_and_get_their_own_answers() -> None:
    table = _Table()
    table.values = {f"k{i}": i for i in range(10)}
    lookup = CoalescedLookup(table.fetch_many, max_in_flight=2)
    table.gate.clear()
    asked = [asyncio.create_task(lookup.get(f"k{i % 10}")) for i in range(60)]
    asked.append(asyncio.create_task(lookup.get("missing")))
    await _until(lambda: len(table.fetches) == 2)
    table.gate.set()
    answers = await asyncio.gather(*asked)
    assert answers == [i % 10 for i in range(60)] + [None]
    # Two ran alone while nothing else did; the 59 that came meanwhile went in one statement,
    # each key asked for once.
    assert table.fetches[:2] == [["k0"], ["k1"]]
    assert sorted(table.fetches[2]) == sorted([f"k{i}" for i in range(10)] + ["missing"])
    assert len(table.fetches) == 3


async def test_a_batch_holds_at_most_max_batch_lookups() -> None:
    table = _Table()
    table.values = {f"k{i}": i for i in range(50)}
    lookup = CoalescedLookup(table.fetch_many, max_in_flight=1, max_batch=20)
    table.gate.clear()
    asked = [asyncio.create_task(lookup.get(f"k{i}")) for i in range(50)]
    await _until(lambda: len(table.fetches) == 1)
    table.gate.set()
    assert await asyncio.gather(*asked) == list(range(50))
    assert [len(keys) for keys in table.fetches] == [1, 20, 20, 9]


async def test_a_lookup_never_gets_an_answer_older_than_itself() -> None:
    table = _Table()
    table.values = {"a": 1}
    lookup = CoalescedLookup(table.fetch_many, max_in_flight=1)
    table.gate.clear()
    before = asyncio.create_task(lookup.get("a"))
    await _until(lambda: len(table.fetches) == 1)  # a statement is running, blind to what follows
    table.values["a"] = 2  # a write commits
    after = asyncio.create_task(lookup.get("a"))  # asked after the write: waits for a new one
    await asyncio.sleep(0)
    table.gate.set()
    assert await before == 1
    assert await after == 2
    assert table.fetches == [["a"], ["a"]]


async def test_a_failed_statement_fails_each_of_its_lookups_and_the_next_ones_still_run() -> None:
    table = _Table()
    table.values = {"a": 1, "b": 2}
    lookup = CoalescedLookup(table.fetch_many, max_in_flight=1)
    table.gate.clear()
    table.failure = ConnectionResetError("connection lost")
    first = asyncio.create_task(lookup.get("a"))
    await _until(lambda: len(table.fetches) == 1)
    waiting = [asyncio.create_task(lookup.get(key)) for key in ("a", "b")]
    await asyncio.sleep(0)
    table.gate.set()
    results = await asyncio.gather(first, *waiting, return_exceptions=True)
    assert all(isinstance(result, ConnectionResetError) for result in results)
    table.failure = None
    assert await lookup.get("b") == 2


async def test_a_lookup_whose_request_left_does_not_hold_back_the_others() -> None:
    table = _Table()
    table.values = {"a": 1, "b": 2}
    lookup = CoalescedLookup(table.fetch_many, max_in_flight=1)
    table.gate.clear()
    first = asyncio.create_task(lookup.get("a"))
    await _until(lambda: len(table.fetches) == 1)
    gone = asyncio.create_task(lookup.get("a"))
    kept = asyncio.create_task(lookup.get("b"))
    await asyncio.sleep(0)
    gone.cancel()
    table.gate.set()
    assert await first == 1
    assert await kept == 2
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert table.fetches == [["a"], ["b"]]  # the cancelled lookup's key was not asked for
