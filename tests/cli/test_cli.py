"""The `tucano` command as an operator uses it: a fresh directory, real processes, real sockets."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import time
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

import tucano
from tests.support.databases import create_scratch_database, drop_scratch_database
from tests.support.processes import clean_env, run_tucano, start_serve
from tests.support.settings import POSTGRES_URL, TEST_SECRET_KEY


def create_client(cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = run_tucano("clients", "create", *args, cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    return dict(json.loads(lines[0]))


def said(result: subprocess.CompletedProcess[str]) -> str:
    """What a command wrote on stderr besides the line naming its database."""
    return "".join(
        line
        for line in result.stderr.splitlines(keepends=True)
        if not line.startswith("database: ")
    )


def token(base_url: str, client: dict[str, object]) -> str:
    response = httpx.post(
        base_url + "/oauth/v1/token",
        data={
            "grant_type": "client_credentials",
            "client_id": str(client["clientId"]),
            "client_secret": str(client["clientSecret"]),
        },
    )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def test_serve_on_a_fresh_directory_just_works(tmp_path: Path) -> None:
    server = start_serve(tmp_path)
    try:
        assert (tmp_path / "tucano.db").exists()
        client = create_client(
            tmp_path, "--customer-id", "42", "--partner-id", "7", "--name", "shop"
        )
        assert set(client) >= {"clientId", "clientSecret", "customerId", "scopes"}
        assert client["customerId"] == 42 and client["partnerId"] == 7
        assert client["scopes"] == [
            "webhook.read",
            "webhook.write",
            "payment-link.read",
            "payment-link.write",
            "portal.session",
        ]
        access_token = token(server.base_url, client)
        headers = {"Authorization": f"Bearer {access_token}"}
        created = httpx.post(
            server.base_url + "/webhook/v1/create",
            json={"targetUrl": "https://hooks.example.com/x", "eventType": "PIX_OUTBOUND"},
            headers=headers,
        )
        assert created.status_code == 200, created.text
        listed = httpx.get(server.base_url + "/webhook/v1/list", headers=headers).json()
        assert listed["totalElements"] == 1
    finally:
        assert server.stop() == 0

    logs = server.logs()
    request_lines = [json.loads(line) for line in logs.splitlines() if '"event": "request"' in line]
    assert len(request_lines) >= 3
    create_line = next(line for line in request_lines if line["path"] == "/webhook/v1/create")
    assert create_line["customerId"] == 42
    assert create_line["method"] == "POST" and create_line["status"] == 200
    assert isinstance(create_line["durationMs"], float)
    assert create_line["transactionId"]
    # Every log line (stdout) is one JSON object; stderr named the database, once, first.
    database_line, *log_lines = logs.splitlines()
    assert database_line == f"database: sqlite+aiosqlite:///{tmp_path / 'tucano.db'}"
    for line in log_lines:
        json.loads(line)
    assert str(client["clientSecret"]) not in logs
    assert access_token not in logs
    assert created.json()["secret"] not in logs

    # The generated sandbox key is kept with the database: tokens survive a restart.
    again = start_serve(tmp_path)
    try:
        still = httpx.get(again.base_url + "/webhook/v1/list", headers=headers)
        assert still.status_code == 200
    finally:
        again.stop()


def test_production_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    env = clean_env(TUCANO_ENVIRONMENT="production")
    result = run_tucano("serve", "--port", "0", cwd=tmp_path, env=env)
    assert result.returncode != 0
    assert "TUCANO_SECRET_KEY" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"TUCANO_SECRET_KEY": "s" * 40}, "TUCANO_SECRET_KEY has fewer than 8 distinct characters"),
        (
            {"TUCANO_SECRET_KEY": TEST_SECRET_KEY, "TUCANO_PUBLIC_URL": "http://pay.example.com"},
            "TUCANO_PUBLIC_URL must be an https URL when TUCANO_ENVIRONMENT=production",
        ),
    ],
)
def test_production_refuses_to_start_with_weak_settings(
    tmp_path: Path, setting: dict[str, str], says: str
) -> None:
    env = clean_env(TUCANO_ENVIRONMENT="production", **setting)
    result = run_tucano("serve", "--port", "0", cwd=tmp_path, env=env)
    assert result.returncode != 0
    assert says in result.stderr
    assert "s" * 40 not in result.stderr
    assert "Traceback" not in result.stderr


def test_production_starts_with_a_secret_key_from_dotenv(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "TUCANO_ENVIRONMENT=production\nTUCANO_SECRET_KEY=" + TEST_SECRET_KEY + "\n"
    )
    server = start_serve(tmp_path)
    try:
        health = httpx.get(server.base_url + "/health").json()
        assert health["environment"] == "production"
    finally:
        server.stop()
    # Left at its default, urlPayment would send payers to this machine's loopback.
    warnings = [line for line in server.logs().splitlines() if "public_url_not_set" in line]
    assert len(warnings) == 1 and "TUCANO_PUBLIC_URL" in warnings[0]


def test_serve_needs_an_interface_to_listen_on(tmp_path: Path) -> None:
    result = run_tucano("serve", "--host", " ", cwd=tmp_path, env=clean_env())
    assert result.returncode == 2
    assert result.stderr.startswith("tucano: --host must name an interface")


def test_serve_says_in_one_line_that_its_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_tucano("serve", "--port", str(port), cwd=tmp_path, env=clean_env())
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"tucano: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert not (tmp_path / "tucano.db").exists()  # refused before anything was made


def test_a_bad_setting_is_named(tmp_path: Path) -> None:
    result = run_tucano("migrate", cwd=tmp_path, env=clean_env(TUCANO_RETRY_SCHEDULE="5s,soon"))
    assert result.returncode == 2
    assert "TUCANO_RETRY_SCHEDULE" in result.stderr


def test_clients_create_scopes(tmp_path: Path) -> None:
    assert run_tucano("migrate", cwd=tmp_path).returncode == 0
    publisher = create_client(tmp_path, "--customer-id", "1", "--scope", "events.publish")
    assert publisher["scopes"] == ["events.publish"]
    several = create_client(
        tmp_path, "--customer-id", "1", "--scope", "webhook.read", "--scope", "payment-link.read"
    )
    assert several["scopes"] == ["webhook.read", "payment-link.read"]
    bad = run_tucano("clients", "create", "--customer-id", "1", "--scope", "root", cwd=tmp_path)
    assert bad.returncode == 2 and "root" in bad.stderr
    missing = run_tucano("clients", "create", cwd=tmp_path)
    assert missing.returncode != 0
    no_scope = run_tucano("clients", "create", "--customer-id", "1", "--scope", "", cwd=tmp_path)
    assert no_scope.returncode == 2 and "at least one scope" in no_scope.stderr
    too_large = run_tucano("clients", "create", "--customer-id", str(2**63), cwd=tmp_path)
    assert too_large.returncode == 2
    assert "--customer-id" in too_large.stderr and "Traceback" not in too_large.stderr


def test_a_revoked_client_gets_no_token_and_its_tokens_stop_working(tmp_path: Path) -> None:
    server = start_serve(tmp_path)
    try:
        leaked = create_client(tmp_path, "--customer-id", "42", "--name", "leaked")
        kept = create_client(tmp_path, "--customer-id", "42", "--name", "kept")
        leaked_token, kept_token = token(server.base_url, leaked), token(server.base_url, kept)

        def list_webhooks(access_token: str) -> httpx.Response:
            return httpx.get(
                server.base_url + "/webhook/v1/list",
                headers={"Authorization": f"Bearer {access_token}"},
            )

        assert list_webhooks(leaked_token).status_code == 200
        revoked = run_tucano("clients", "revoke", str(leaked["clientId"]), cwd=tmp_path)
        assert revoked.returncode == 0, revoked.stderr
        summary = json.loads(revoked.stdout)
        assert summary["clientId"] == leaked["clientId"] and summary["revokedAt"].endswith("Z")
        # No new token...
        refused = httpx.post(
            server.base_url + "/oauth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": str(leaked["clientId"]),
                "client_secret": str(leaked["clientSecret"]),
            },
        )
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
        # ...and the one it holds stops working within the refresh period (5 s).
        deadline = time.monotonic() + 10
        while (answer := list_webhooks(leaked_token)).status_code == 200:
            assert time.monotonic() < deadline, "the revoked client's token still works"
            time.sleep(0.2)
        assert answer.status_code == 401
        assert answer.json()["errors"] == ["the API client of this access token has been revoked"]
        assert list_webhooks(kept_token).status_code == 200  # another client of the customer
        listed = run_tucano("clients", "list", "--customer-id", "42", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        clients = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(c["name"], c["revokedAt"] is None) for c in clients] == [
            ("leaked", False),
            ("kept", True),
        ]
        assert all("clientSecret" not in c for c in clients)
        # Revoking again keeps the first time; an unknown id is an error in one line.
        again = run_tucano("clients", "revoke", str(leaked["clientId"]), cwd=tmp_path)
        assert json.loads(again.stdout)["revokedAt"] == summary["revokedAt"]
        unknown = run_tucano("clients", "revoke", "tci_nobody", cwd=tmp_path)
        assert unknown.returncode == 2
        assert said(unknown).strip() == "tucano: no API client has the id 'tci_nobody'"
    finally:
        server.stop()


def test_serve_and_clients_list_need_no_write_lock(tmp_path: Path) -> None:
    # (Regression check: the revoked-client list was read through the writing connection, so
    # another process holding SQLite's write lock kept `serve` from starting.)
    start_serve(tmp_path).stop()  # migrated, and the sandbox's secret key made
    create_client(tmp_path, "--customer-id", "42", "--name", "shop")
    other_process = sqlite3.connect(tmp_path / "tucano.db", isolation_level=None, timeout=5)
    try:
        other_process.execute("BEGIN IMMEDIATE")  # holds the write lock
        started = time.monotonic()
        listed = run_tucano("clients", "list", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["name"] == "shop"
        # (The API alone: the worker's jobs write, and would wait for the lock as writers do.)
        server = start_serve(tmp_path, clean_env(), "--no-migrate", "--no-worker")
        server.stop()
        assert time.monotonic() - started < 9  # SQLite's busy timeout is 10 s
        # A write that cannot get the lock says so in one line.
        revoked = run_tucano("clients", "revoke", "tci_x", cwd=tmp_path, timeout=30)
        assert revoked.returncode == 2
        assert said(revoked).startswith("tucano: could not use the database: ")
        assert "Traceback" not in revoked.stderr
        created = run_tucano(
            "clients", "create", "--customer-id", "7", "--no-migrate", cwd=tmp_path, timeout=30
        )
        assert created.returncode == 2
        assert said(created).startswith("tucano: could not use the database: ")
    finally:
        other_process.close()


def test_a_restarted_server_refuses_a_revoked_clients_token_at_once(tmp_path: Path) -> None:
    server = start_serve(tmp_path)
    try:
        client = create_client(tmp_path, "--customer-id", "42")
        access_token = token(server.base_url, client)
    finally:
        server.stop()
    assert run_tucano("clients", "revoke", str(client["clientId"]), cwd=tmp_path).returncode == 0
    server = start_serve(tmp_path)
    try:
        answer = httpx.get(
            server.base_url + "/webhook/v1/list",
            headers={"Authorization": f"Bearer {access_token}"},
        )
        assert answer.status_code == 401
    finally:
        server.stop()


def test_migrate_is_idempotent(tmp_path: Path) -> None:
    for _ in range(2):
        result = run_tucano("migrate", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.strip().splitlines()[-1])["migrated"] is True


def test_processes_migrating_one_new_sqlite_file_at_once_wait_for_each_other(
    tmp_path: Path,
) -> None:
    """As when `tucano serve` and `tucano worker` start together on a new laptop: the first
    migrates, the others wait for SQLite's write lock and find the schema done."""
    from concurrent.futures import ThreadPoolExecutor

    from tucano.migrations import schema_problem

    for attempt in range(3):
        directory = tmp_path / str(attempt)
        directory.mkdir()
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda cwd: run_tucano("migrate", cwd=cwd), [directory] * 3))
        for result in results:
            assert result.returncode == 0, result.stderr
        url = f"sqlite+aiosqlite:///{directory / 'tucano.db'}"
        assert schema_problem(url, migrating=False) is None


def test_a_schema_at_head_is_not_held_up_by_another_process_writing(tmp_path: Path) -> None:
    assert run_tucano("migrate", cwd=tmp_path).returncode == 0
    writer = sqlite3.connect(tmp_path / "tucano.db")
    try:
        writer.execute("BEGIN IMMEDIATE")  # as a worker's long write would hold it
        result = run_tucano("migrate", cwd=tmp_path, timeout=20)  # it would wait 300 s
        assert result.returncode == 0, result.stderr
    finally:
        writer.rollback()
        writer.close()


def test_migrate_shows_the_database_without_its_password() -> None:
    from tucano.cli.common import safe_url as _safe_url

    shown = _safe_url("postgresql+asyncpg://app:Pw1@db:5432/pay?password=Pw2&ssl=require")
    assert shown == "postgresql+asyncpg://app:***@db:5432/pay?password=hidden&ssl=require"


def test_no_migrate_refuses_a_schema_it_cannot_run_on(tmp_path: Path) -> None:
    from tucano.migrations import upgrade

    database_url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    env = clean_env(TUCANO_DATABASE_URL=database_url)
    # (serve on port 0: the port is checked first, and 8000 may be another process's.)
    for command in (("serve", "--no-migrate", "--port", "0"), ("worker", "--no-migrate")):
        missing = run_tucano(*command, cwd=tmp_path, env=env)
        assert missing.returncode == 2, missing
        assert "old.db does not exist: run `tucano migrate`" in said(missing)
        assert not (tmp_path / "old.db").exists()
    (tmp_path / "old.db").touch()  # there, but empty
    for command in (("serve", "--no-migrate", "--port", "0"), ("worker", "--no-migrate")):
        empty = run_tucano(*command, cwd=tmp_path, env=env)
        assert empty.returncode == 2, empty
        assert said(empty) == "tucano: the database has no schema yet: run `tucano migrate` first\n"
    upgrade(database_url, "0008_previous_secrets")  # an older release's schema
    for command in (
        ("serve", "--no-migrate", "--port", "0"),
        ("worker", "--no-migrate"),
        ("clients", "create", "--customer-id", "1", "--no-migrate"),
    ):
        older = run_tucano(*command, cwd=tmp_path, env=env)
        assert older.returncode == 2, older
        assert "this release needs" in older.stderr and "run `tucano migrate` first" in older.stderr
    assert run_tucano("migrate", cwd=tmp_path, env=env).returncode == 0
    _set_revision(tmp_path / "old.db", "0099_from_a_later_release")
    for command in (("serve", "--no-migrate", "--port", "0"), ("migrate",)):
        newer = run_tucano(*command, cwd=tmp_path, env=env)
        assert newer.returncode == 2, newer
        assert said(newer).startswith(
            "tucano: the database's schema (0099_from_a_later_release) is newer than this release"
        )


def _set_revision(path: Path, revision: str) -> None:
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = ?", (revision,))


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    env = clean_env(TUCANO_DATABASE_URL="postgresql+asyncpg://postgres@127.0.0.1:1/nodb")
    for command in (("serve", "--no-migrate", "--port", "0"), ("worker",)):
        result = run_tucano(*command, cwd=tmp_path, env=env)
        assert result.returncode == 2, result
        assert said(result).startswith("tucano: could not reach the database: ")
        assert len(said(result).splitlines()) == 1


def test_migrations_ship_inside_the_package() -> None:
    versions = resources.files("tucano.migrations") / "versions"
    assert any(p.name.endswith(".py") for p in versions.iterdir())
    assert (resources.files("tucano.migrations") / "script.py.mako").is_file()


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="TUCANO_TEST_DATABASE_URL not set")
async def test_several_servers_start_at_once_on_one_postgresql(tmp_path: Path) -> None:
    url = await create_scratch_database(POSTGRES_URL)
    env = clean_env(TUCANO_DATABASE_URL=url)
    servers = []
    try:
        import asyncio

        servers = await asyncio.gather(
            *(asyncio.to_thread(start_serve, tmp_path, env) for _ in range(3))
        )
        client = create_client(tmp_path, "--customer-id", "9", env=env)
        # The sandbox key generated by one is the key of all: a token from one works on the others.
        access_token = token(servers[0].base_url, client)
        for server in servers:
            response = httpx.get(  # noqa: ASYNC210 - the servers are other processes
                server.base_url + "/webhook/v1/list",
                headers={"Authorization": f"Bearer {access_token}"},
            )
            assert response.status_code == 200
    finally:
        for server in servers:
            server.stop()
        await drop_scratch_database(POSTGRES_URL, url)


def test_the_command_runs_from_any_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path / "some" / "where"
    elsewhere.mkdir(parents=True)
    result = run_tucano("--help", cwd=elsewhere)
    assert result.returncode == 0
    for command in ("serve", "worker", "migrate", "clients"):
        assert command in result.stdout
    assert not (elsewhere / "tucano.db").exists()  # --help touches no database


def test_customers_set_and_show_a_merchant_profile_the_checkout_then_shows(
    tmp_path: Path,
) -> None:
    server = start_serve(tmp_path)
    try:
        result = run_tucano(
            "customers", "set", "--customer-id", "42", "--merchant-name", "Padaria São João",
            "--merchant-city", "Belém", "--pix-key", "+55 (91) 98765-4321", "--mcc", "5462",
            cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        profile = json.loads(result.stdout)
        assert profile == profile | {
            "customerId": 42,
            "merchantName": "Padaria São João",
            "merchantCity": "Belém",
            "pixKey": "+5591987654321",
            "mcc": "5462",
        }
        shown = run_tucano("customers", "show", "--customer-id", "42", cwd=tmp_path)
        assert shown.returncode == 0 and json.loads(shown.stdout) == profile
        # A second set keeps what it is not given, and --clear-pix-key removes the key.
        again = run_tucano(
            "customers", "set", "--customer-id", "42", "--merchant-name", "Padaria Nova",
            "--merchant-city", "Belém", cwd=tmp_path,
        )  # fmt: skip
        assert json.loads(again.stdout)["pixKey"] == "+5591987654321"
        assert json.loads(again.stdout)["mcc"] == "5462"
        cleared = run_tucano(
            "customers", "set", "--customer-id", "42", "--merchant-name", "Padaria Nova",
            "--merchant-city", "Belém", "--clear-pix-key", cwd=tmp_path,
        )  # fmt: skip
        assert json.loads(cleared.stdout)["pixKey"] is None

        client = create_client(tmp_path, "--customer-id", "42")
        headers = {
            "Authorization": f"Bearer {token(server.base_url, client)}",
            "x-transaction-id": "5b7f8f0e-3d3c-4f5e-9a53-2f1d2b6c7e10",
        }
        link = httpx.post(
            server.base_url + "/payment-link/v1",
            json={
                "payerName": "Maria", "registrationNumber": "52998224725", "amount": 10,
                "numbersInstallments": 1, "expirationDays": 1,
            },
            headers=headers,
        ).json()  # fmt: skip
        address = urlsplit(link["urlPayment"])
        page = httpx.get(
            f"{server.base_url}{address.path}?{address.query}", headers={"accept": "text/html"}
        ).text
        assert "Cobrança de Padaria Nova" in page
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--pix-key", "not-a-key"], "--pix-key: a Pix key must be"),
        (["--mcc", "12"], "--mcc"),
        (["--pix-key", "52998224725", "--clear-pix-key"], "not both"),
    ],
)
def test_customers_set_refuses_what_the_checkout_cannot_use(
    tmp_path: Path, args: list[str], says: str
) -> None:
    run_tucano("migrate", cwd=tmp_path)
    result = run_tucano(
        "customers", "set", "--customer-id", "1", "--merchant-name", "Loja",
        "--merchant-city", "Rio", *args, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode != 0 and says in result.stderr
    missing = run_tucano("customers", "show", "--customer-id", "1", cwd=tmp_path)
    assert missing.returncode != 0 and "no merchant profile" in missing.stderr


def test_customers_set_refuses_keys_the_directory_cannot_hold_and_names_that_hide_things(
    tmp_path: Path,
) -> None:
    run_tucano("migrate", cwd=tmp_path)
    given = {"--merchant-name": "Loja", "--merchant-city": "Rio"}
    for option, value, says in [
        ("--pix-key", "a%b@example.com", "--pix-key: a Pix key must be"),
        ("--pix-key", "user@-example.com", "this e-mail address is not one"),
        ("--pix-key", "+551133334444", "a phone key is a mobile number"),
        ("--merchant-name", "Loja\u202eanuaP", "--merchant-name: must not hold invisible"),
        ("--merchant-city", "\u200b", "--merchant-city: must not hold invisible"),
        ("--merchant-name", "Loja 4111|1111|1111|1111", "--merchant-name: has a card number"),
    ]:
        options = [part for pair in (given | {option: value}).items() for part in pair]
        result = run_tucano("customers", "set", "--customer-id", "1", *options, cwd=tmp_path)
        assert result.returncode == 2 and says in result.stderr, (value, result.stderr)
    missing = run_tucano("customers", "show", "--customer-id", "1", cwd=tmp_path)
    assert missing.returncode != 0 and "no merchant profile" in missing.stderr
    kept = run_tucano(
        "customers", "set", "--customer-id", "1", "--merchant-name", "João Ávila Ltda",
        "--merchant-city", "São Paulo", "--pix-key", "Joao.Avila+pix@loja-1.com.br", cwd=tmp_path,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["pixKey"] == "joao.avila+pix@loja-1.com.br"


def test_version_and_help_read_plainly() -> None:
    version = run_tucano("--version", cwd=Path.cwd())
    assert version.returncode == 0 and version.stdout.strip() == f"tucano {tucano.__version__}"
    for command in (
        ("--help",),
        ("serve", "--help"),
        ("clients", "create", "--help"),
        ("clients", "list", "--help"),
        ("clients", "revoke", "--help"),
        ("customers", "set", "--help"),
        ("portal", "url", "--help"),
    ):
        shown = run_tucano(*command, cwd=Path.cwd(), env=clean_env(COLUMNS="80"))
        assert shown.returncode == 0, shown.stderr
        text = shown.stdout
        assert not re.search(r"<(bool|int|str|int range|text)>", text), text  # no type tags
        assert "╭" not in text  # plain text, as a terminal or a pipe shows it
        # A range is never cut: no line ends inside a number that continues on the next.
        assert not re.search(r"\d\n\s*\d", text), text
    scopes = run_tucano("clients", "create", "--help", cwd=Path.cwd()).stdout
    for scope in (
        "webhook.read",
        "webhook.write",
        "payment-link.read",
        "payment-link.write",
        "portal.session",
    ):
        assert f"\n    {scope}\n" in scopes
    assert "events.publish" in scopes


def test_every_command_on_the_database_names_it(tmp_path: Path) -> None:
    named = f"database: sqlite+aiosqlite:///{tmp_path / 'tucano.db'}"
    migrated = run_tucano("migrate", cwd=tmp_path)
    assert migrated.returncode == 0 and named in migrated.stderr.splitlines()
    for command in (
        ("clients", "create", "--customer-id", "3"),
        ("clients", "list"),
        ("clients", "revoke", "tci_nobody"),
        ("customers", "set", "--customer-id", "3", "--merchant-name", "L", "--merchant-city", "R"),
        ("customers", "show", "--customer-id", "3"),
    ):  # fmt: skip
        result = run_tucano(*command, cwd=tmp_path)
        assert named in result.stderr.splitlines(), (command, result.stderr)


def test_a_command_on_a_database_that_is_not_there_makes_none(tmp_path: Path) -> None:
    for command in (
        ("clients", "create", "--customer-id", "3"),
        ("clients", "list"),
        ("customers", "show", "--customer-id", "3"),
    ):
        result = run_tucano(*command, cwd=tmp_path)
        assert result.returncode == 2, result
        assert said(result).startswith("tucano: the database sqlite+aiosqlite:///")
        assert "does not exist: run `tucano migrate`" in said(result)
        assert not (tmp_path / "tucano.db").exists()
    # Asked to, it makes and migrates one.
    made = run_tucano("clients", "create", "--customer-id", "3", "--migrate", cwd=tmp_path)
    assert made.returncode == 0, made.stderr and (tmp_path / "tucano.db").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--customer-id", "1", "--customer-id", "2"], "--customer-id is given more than once"),
        (["--customer-id=1", "--customer-id", "2"], "--customer-id is given more than once"),
        (
            ["--customer-id", "1", "--migrate", "--no-migrate"],
            "--migrate/--no-migrate is given more than once",
        ),
        (["--customer-id", "1", "--name", ""], "--name must not be empty"),
        (["--customer-id", "1", "--name", "   "], "--name must not be empty"),
    ],
)
def test_clients_create_refuses_what_it_would_otherwise_guess(
    tmp_path: Path, args: list[str], says: str
) -> None:
    assert run_tucano("migrate", cwd=tmp_path).returncode == 0
    result = run_tucano("clients", "create", *args, cwd=tmp_path)
    assert result.returncode == 2 and says in said(result), result
    listed = run_tucano("clients", "list", cwd=tmp_path)
    assert listed.stdout == ""  # nothing was created
    twice = run_tucano("clients", "create", "--customer-id", "1", "--scope", "webhook.read",
                       "--scope", "webhook.write", cwd=tmp_path)  # fmt: skip
    assert twice.returncode == 0, twice.stderr  # a repeatable option may repeat


@pytest.mark.parametrize(
    ("log_format", "json_lines"), [("", True), ("json", True), ("console", False)]
)
def test_serve_logs_json_lines_unless_told_otherwise_or_on_a_terminal(
    tmp_path: Path, log_format: str, json_lines: bool
) -> None:
    env = clean_env(TUCANO_LOG_FORMAT=log_format) if log_format else clean_env()
    server = start_serve(tmp_path, env)
    try:
        httpx.get(server.base_url + "/health/live")
        logs = server.wait_for_log("/health/live")
    finally:
        server.stop()
    line = next(line for line in logs.splitlines() if "/health/live" in line)
    if json_lines:
        assert json.loads(line)["path"] == "/health/live"
    else:
        assert not line.startswith("{") and "request" in line and "path=/health/live" in line


def test_secrets_reencrypt_moves_secrets_to_the_current_key(tmp_path: Path) -> None:
    from tucano.core.secret_box import key_id
    from tucano.webhooks.models import Webhook
    from tucano.webhooks.secret_store import WebhookSecretStore

    old_key, new_key = "old-key-" + "o" * 32, "new-key-" + "n" * 32
    assert (
        run_tucano("migrate", cwd=tmp_path, env=clean_env(TUCANO_SECRET_KEY=old_key)).returncode
        == 0
    )
    sealed = Webhook(id=1, secret="", previous_secrets=None)
    WebhookSecretStore(old_key.encode()).seal(sealed, secret="whsec_kept", previous_secrets=None)
    database = sqlite3.connect(tmp_path / "tucano.db")
    with database:
        database.execute(
            "INSERT INTO webhooks (id, customer_id, target_url, event_type, is_active, secret,"
            " created_at, updated_at) VALUES (1, 10, 'https://example.com/h', 'PIX_OUTBOUND', 1,"
            " ?, '2026-12-02 10:00:00.000000', '2026-12-02 10:00:00.000000')",
            (sealed.secret,),
        )
    database.close()

    # Without the old key the value cannot be opened, and the command says which key it needs.
    unknown = run_tucano(
        "secrets", "reencrypt", cwd=tmp_path, env=clean_env(TUCANO_SECRET_KEY=new_key)
    )
    assert unknown.returncode == 2 and "TUCANO_PREVIOUS_SECRET_KEYS" in unknown.stderr
    rotating = clean_env(TUCANO_SECRET_KEY=new_key, TUCANO_PREVIOUS_SECRET_KEYS=old_key)
    done = run_tucano("secrets", "reencrypt", cwd=tmp_path, env=rotating)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"webhooksResealed": 1, "keyId": key_id(new_key.encode())}
    again = run_tucano("secrets", "reencrypt", cwd=tmp_path, env=rotating)
    assert json.loads(again.stdout)["webhooksResealed"] == 0

    database = sqlite3.connect(tmp_path / "tucano.db")
    [(stored,)] = database.execute("SELECT secret FROM webhooks").fetchall()
    database.close()
    resealed = Webhook(id=1, secret=stored, previous_secrets=None)
    assert WebhookSecretStore(new_key.encode()).secret(resealed) == "whsec_kept"


@pytest.mark.parametrize("command", [(), ("clients",), ("clients", "create"), ("serve",)])
def test_minus_h_is_help_as_minus_minus_help_is(tmp_path: Path, command: tuple[str, ...]) -> None:
    short = run_tucano(*command, "-h", cwd=tmp_path)
    long = run_tucano(*command, "--help", cwd=tmp_path)
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout
    assert "Usage: tucano" in short.stdout


def test_serve_on_another_port_builds_links_on_that_port_when_no_public_url_is_set(
    tmp_path: Path,
) -> None:
    server = start_serve(tmp_path)  # a free port, never 8000
    try:
        client = create_client(tmp_path, "--customer-id", "7")
        headers = {
            "Authorization": f"Bearer {token(server.base_url, client)}",
            "x-transaction-id": "0b7f8f0e-3d3c-4f5e-9a53-2f1d2b6c7e11",
        }
        link = httpx.post(
            server.base_url + "/payment-link/v1",
            json={
                "payerName": "Maria", "registrationNumber": "52998224725", "amount": 10,
                "numbersInstallments": 1, "expirationDays": 1,
            },
            headers=headers,
        ).json()  # fmt: skip
        assert link["urlPayment"].startswith(server.base_url + "/")
    finally:
        server.stop()
    assert any("public_url_follows_port" in line for line in server.logs().splitlines())
    # A public URL that is set is kept as it is.
    (tmp_path / ".env").write_text("TUCANO_PUBLIC_URL=https://pay.example.com\n")
    server = start_serve(tmp_path)
    try:
        client = create_client(tmp_path, "--customer-id", "8")
        link = httpx.post(
            server.base_url + "/payment-link/v1",
            json={
                "payerName": "Maria", "registrationNumber": "52998224725", "amount": 10,
                "numbersInstallments": 1, "expirationDays": 1,
            },
            headers={
                "Authorization": f"Bearer {token(server.base_url, client)}",
                "x-transaction-id": "1b7f8f0e-3d3c-4f5e-9a53-2f1d2b6c7e12",
            },
        ).json()  # fmt: skip
        assert link["urlPayment"].startswith("https://pay.example.com/")
    finally:
        server.stop()
