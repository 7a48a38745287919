"""The `tucano` command: serve, worker, migrate, clients create / list / revoke, customers set /
show."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from tucano.config import DEFAULT_PUBLIC_URL, ConfigurationError, Settings, load_settings

if TYPE_CHECKING:
    from tucano.auth.models import ApiClient

T = TypeVar("T")

# Ids are 64-bit signed integers in the database.
MAX_ID = 2**63 - 1

app = typer.Typer(
    name="tucano",
    help="Tucano: payments API for Brazil (webhooks and payment links).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
clients_app = typer.Typer(help="Manage API clients (credentials for POST /oauth/v1/token).")
app.add_typer(clients_app, name="clients")
customers_app = typer.Typer(
    help="Merchant profiles: the name, city and Pix key a payer's checkout shows and pays."
)
app.add_typer(customers_app, name="customers")


def _fail(message: str) -> NoReturn:
    typer.echo(f"tucano: {message}", err=True)
    raise typer.Exit(code=2)


def _check_can_listen(host: str, port: int) -> None:
    """Fail in one line now if the address cannot be listened on (a port in use, a host that
    does not resolve to this machine), as uvicorn would only after everything had started."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        _fail(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}")
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigurationError as exc:
        _fail(str(exc))


def _prepare_database(settings: Settings, *, migrate: bool) -> None:
    """Migrate (or, with --no-migrate, check that nothing is pending), so that a process never
    starts on a schema it cannot run on: it would fail request by request, saying why nowhere."""
    from tucano.errors import exception_summary
    from tucano.migrations import schema_problem, upgrade

    try:
        problem = schema_problem(settings.database_url, migrating=migrate)
    except Exception as exc:
        _fail(f"could not reach the database: {exception_summary(exc)}")
    if problem:
        _fail(problem)
    if migrate:
        try:
            upgrade(settings.database_url)
        except Exception as exc:
            _fail(f"could not migrate the database: {exception_summary(exc)}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=0, max=65535)] = 8000,
    migrate: Annotated[bool, typer.Option(help="Apply pending migrations before starting.")] = True,
    worker: Annotated[
        bool,
        typer.Option(help="Run the delivery worker and periodic jobs in this process too."),
    ] = True,
) -> None:
    """Run the API, and (unless --no-worker) the delivery worker and scheduler, in one process."""
    import structlog
    import uvicorn

    from tucano.app import create_app
    from tucano.logs import configure_logging
    from tucano.runtime import raise_open_files_limit, size_resolver_threads, tune_garbage_collector

    if not host.strip():
        _fail("--host must name an interface, such as 127.0.0.1, or 0.0.0.0 for all of them")
    _check_can_listen(host, port)  # before migrating and starting the worker, not after
    settings = _settings()
    configure_logging(settings.log_level)
    if not settings.is_sandbox and settings.public_url == DEFAULT_PUBLIC_URL:
        # Payers would be sent to this machine's loopback.
        structlog.get_logger("tucano").warning(
            "public_url_not_set",
            publicUrl=settings.public_url,
            hint="set TUCANO_PUBLIC_URL to the address payers reach the service at",
        )
    _prepare_database(settings, migrate=migrate)
    size_resolver_threads()
    _exit_cleanly_after_sigterm()
    try:
        app = create_app(settings, background=worker)
    except ConfigurationError as exc:
        _fail(str(exc))
    tune_garbage_collector()
    raise_open_files_limit()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=30,
    )


@app.command("worker")
def worker_command(
    migrate: Annotated[bool, typer.Option(help="Apply pending migrations before starting.")] = True,
) -> None:
    """Run only the delivery worker and periodic jobs (for scale-out on PostgreSQL)."""
    from tucano.logs import configure_logging
    from tucano.runtime import raise_open_files_limit, size_resolver_threads, tune_garbage_collector

    settings = _settings()
    configure_logging(settings.log_level)
    _prepare_database(settings, migrate=migrate)
    size_resolver_threads()
    tune_garbage_collector()
    raise_open_files_limit()
    try:
        import uvloop  # installed with uvicorn[standard]; the loop `tucano serve` runs on too
    except ImportError:  # pragma: no cover
        asyncio.run(_run_worker(settings))
    else:
        uvloop.run(_run_worker(settings))


async def _run_worker(settings: Settings) -> None:
    from tucano.background import run_background
    from tucano.db import Database

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    database = Database(settings.database_url)
    try:
        await run_background(database, settings, stop)
    finally:
        await database.dispose()


@app.command("migrate")
def migrate_command() -> None:
    """Apply pending database migrations (safe to run from several processes at once)."""
    from tucano.logs import configure_logging

    settings = _settings()
    configure_logging(settings.log_level)
    _prepare_database(settings, migrate=True)
    typer.echo(json.dumps({"migrated": True, "database": _safe_url(settings.database_url)}))


@clients_app.command("create")
def create_client_command(
    customer_id: Annotated[
        int,
        typer.Option("--customer-id", help="Customer the client acts for.", min=1, max=MAX_ID),
    ],
    partner_id: Annotated[
        int | None, typer.Option("--partner-id", help="Partner, if any.", min=1, max=MAX_ID)
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="A scope to grant (repeatable). Default: webhook.read webhook.write "
            "payment-link.read payment-link.write.",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="A label for the client.")] = None,
    migrate: Annotated[bool, typer.Option(help="Apply pending migrations first.")] = True,
) -> None:
    """Create an API client and print its credentials once, as one JSON object."""
    from tucano.auth.service import create_client, parse_scopes
    from tucano.auth.tokens import MERCHANT_SCOPES
    from tucano.db import Database

    settings = _settings()
    try:
        scopes = parse_scopes(scope) if scope is not None else MERCHANT_SCOPES
    except ValueError as exc:
        _fail(str(exc))
    _prepare_database(settings, migrate=migrate)

    async def run() -> dict[str, object]:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.session() as session:
                client, secret = await create_client(
                    session,
                    customer_id=customer_id,
                    partner_id=partner_id,
                    scopes=scopes,
                    name=name,
                )
                await session.commit()
        finally:
            await database.dispose()
        return {
            "clientId": client.client_id,
            "clientSecret": secret,
            "customerId": client.customer_id,
            "partnerId": client.partner_id,
            "scopes": client.scopes.split(),
            "name": client.name,
        }

    typer.echo(json.dumps(_run_on_database(run)))


def _option_problem(error: dict[str, Any]) -> str:
    """A validation error of a command's option, in the words of the API's errors."""
    from tucano.errors import describe_validation_error

    option = "--" + str(error["loc"][0]).replace("_", "-")
    return describe_validation_error({**error, "loc": (option,)})


def _exit_cleanly_after_sigterm() -> None:
    """uvicorn shuts down gracefully on SIGTERM and then re-raises the signal to the handler that
    was there before it; make that handler a clean exit, so a graceful stop exits with 0."""
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))


def _safe_url(url: str) -> str:
    """The URL to show: its password hidden, in the user part or in the query."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    hidden = {key: "hidden" for key in parsed.query if "pass" in key.lower()}
    return parsed.update_query_dict(hidden).render_as_string(hide_password=True)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


def _run_on_database(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """asyncio.run(work()), failing in one line if the database cannot be used (locked by
    another process for longer than the busy timeout, say) rather than with a traceback."""
    from tucano.errors import exception_summary

    try:
        return asyncio.run(work())
    except Exception as exc:
        _fail(f"could not use the database: {exception_summary(exc)[:300]}")


def _client_summary(client: ApiClient) -> dict[str, object]:
    from tucano.clock import format_utc

    return {
        "clientId": client.client_id,
        "customerId": client.customer_id,
        "partnerId": client.partner_id,
        "scopes": client.scopes.split(),
        "name": client.name,
        "createdAt": format_utc(client.created_at),
        "revokedAt": format_utc(client.revoked_at) if client.revoked_at else None,
    }


@clients_app.command("list")
def list_clients_command(
    customer_id: Annotated[
        int | None,
        typer.Option("--customer-id", help="Only this customer's clients.", min=1, max=MAX_ID),
    ] = None,
) -> None:
    """Print every API client (secrets are not kept), oldest first, one JSON object a line."""
    from tucano.auth.service import list_clients
    from tucano.db import Database

    settings = _settings()
    _prepare_database(settings, migrate=False)

    async def run() -> list[dict[str, object]]:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.read_session() as session:
                return [
                    _client_summary(c) for c in await list_clients(session, customer_id=customer_id)
                ]
        finally:
            await database.dispose()

    for line in _run_on_database(run):
        typer.echo(json.dumps(line))


@clients_app.command("revoke")
def revoke_client_command(
    client_id: Annotated[str, typer.Argument(help="The clientId to revoke (tci_...).")],
) -> None:
    """Revoke an API client: it gets no more tokens, and the tokens it holds stop working in
    every process within seconds. There is no undoing it: create a new client instead."""
    from tucano.auth.service import revoke_client
    from tucano.clock import clock
    from tucano.db import Database

    settings = _settings()
    _prepare_database(settings, migrate=False)

    async def run() -> dict[str, object] | None:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.session() as session:
                client = await revoke_client(session, client_id=client_id, now=clock.now())
                await session.commit()
                return None if client is None else _client_summary(client)
        finally:
            await database.dispose()

    revoked = _run_on_database(run)
    if revoked is None:
        _fail(f"no API client has the id {client_id!r}")
    typer.echo(json.dumps(revoked))


@customers_app.command("set")
def set_customer_command(
    customer_id: Annotated[
        int, typer.Option("--customer-id", help="The customer (merchant).", min=1, max=MAX_ID)
    ],
    merchant_name: Annotated[
        str,
        typer.Option(
            "--merchant-name",
            help="The name payers see (the BR Code carries it without accents, at most 25 "
            "characters).",
        ),
    ],
    merchant_city: Annotated[
        str,
        typer.Option(
            "--merchant-city",
            help="The merchant's city (the BR Code carries at most 15 characters).",
        ),
    ],
    pix_key: Annotated[
        str | None,
        typer.Option(
            "--pix-key",
            help="The Pix key payments go to: a CPF, CNPJ, +55 phone, e-mail or random key. "
            "Without one, production offers no PIX. Left out: the stored key is kept.",
        ),
    ] = None,
    clear_pix_key: Annotated[
        bool, typer.Option("--clear-pix-key", help="Remove the stored Pix key.")
    ] = False,
    mcc: Annotated[
        str | None,
        typer.Option("--mcc", help="Merchant category code, 4 digits (default 0000)."),
    ] = None,
) -> None:
    """Create or change a customer's merchant profile and print it as one JSON object."""
    from pydantic import ValidationError

    from tucano.clock import clock
    from tucano.customers.schemas import MerchantProfileInput
    from tucano.customers.service import profile_summary, set_profile
    from tucano.db import Database

    if pix_key is not None and clear_pix_key:
        _fail("give --pix-key or --clear-pix-key, not both")
    try:
        profile = MerchantProfileInput(
            merchant_name=merchant_name, merchant_city=merchant_city, pix_key=pix_key, mcc=mcc
        )
    except ValidationError as exc:
        _fail("; ".join(_option_problem(dict(error)) for error in exc.errors()))
    settings = _settings()
    _prepare_database(settings, migrate=False)

    async def run() -> dict[str, object]:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.session() as session:
                stored = await set_profile(
                    session,
                    customer_id=customer_id,
                    profile=profile,
                    clear_pix_key=clear_pix_key,
                    now=clock.now(),
                )
                summary = profile_summary(stored)
                await session.commit()
                return summary
        finally:
            await database.dispose()

    typer.echo(json.dumps(_run_on_database(run), ensure_ascii=False))


@customers_app.command("show")
def show_customer_command(
    customer_id: Annotated[
        int, typer.Option("--customer-id", help="The customer (merchant).", min=1, max=MAX_ID)
    ],
) -> None:
    """Print a customer's merchant profile as one JSON object."""
    from tucano.customers.service import get_profile, profile_summary
    from tucano.db import Database

    settings = _settings()
    _prepare_database(settings, migrate=False)

    async def run() -> dict[str, object] | None:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.read_session() as session:
                stored = await get_profile(session, customer_id=customer_id)
                return None if stored is None else profile_summary(stored)
        finally:
            await database.dispose()

    shown = _run_on_database(run)
    if shown is None:
        sandbox = " (its sandbox checkout shows TUCANO SANDBOX)" if settings.is_sandbox else ""
        _fail(
            f"customer {customer_id} has no merchant profile{sandbox}: "
            "set one with tucano customers set"
        )
    typer.echo(json.dumps(shown, ensure_ascii=False))
