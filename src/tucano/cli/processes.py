"""The commands that run Tucano: serve (API, worker and scheduler in one process), worker, and
migrate."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import signal
import sys
from typing import Annotated

import typer

from tucano.cli.common import fail, prepare_database, safe_url, settings_or_fail
from tucano.config import DEFAULT_PUBLIC_URL, ConfigurationError, Settings

processes_app = typer.Typer()


def check_can_listen(host: str, port: int) -> None:
    """Fail in one line now if the address cannot be listened on (a port in use, a host that
    does not resolve to this machine), as uvicorn would only after everything had started."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        fail(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}")
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def local_url(host: str, port: int) -> str:
    """The address of a server listening on `host`:`port`, as a browser on this machine reaches
    it (a wildcard interface by the loopback one)."""
    with contextlib.suppress(ValueError):  # a host name stays as it is
        if ipaddress.ip_address(host).is_unspecified:
            host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


@processes_app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Interface to listen on.", metavar="ADDRESS")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="Port to listen on.", min=0, max=65535, metavar="PORT")
    ] = 8000,
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
    from tucano.core.logs import configure_logging
    from tucano.runtime import raise_open_files_limit, size_resolver_threads, tune_garbage_collector

    if not host.strip():
        fail("--host must name an interface, such as 127.0.0.1, or 0.0.0.0 for all of them")
    check_can_listen(host, port)  # before migrating and starting the worker, not after
    settings = settings_or_fail()
    configure_logging(settings.log_level, log_format=settings.log_format)
    if not settings.is_sandbox and settings.public_url == DEFAULT_PUBLIC_URL:
        # Payers would be sent to this machine's loopback.
        structlog.get_logger("tucano").warning(
            "public_url_not_set",
            publicUrl=settings.public_url,
            hint="set TUCANO_PUBLIC_URL to the address payers reach the service at",
        )
    prepare_database(settings, migrate=migrate)
    if settings.is_sandbox and "public_url" not in settings.model_fields_set:
        # Left unset, links would name port 8000 whatever port this server listens on.
        settings = settings.model_copy(update={"public_url": local_url(host, port)})
        structlog.get_logger("tucano").info(
            "public_url_follows_port", publicUrl=settings.public_url
        )
    size_resolver_threads()
    exit_cleanly_after_sigterm()
    try:
        app = create_app(settings, background=worker)
    except ConfigurationError as exc:
        fail(str(exc))
    tune_garbage_collector()
    open_files = raise_open_files_limit()
    uvicorn.run(
        app,
        host=host,
        port=port,
        http="httptools",
        loop="uvloop",
        # Past it, uvicorn answers 503 to new requests: the descriptors left stay the worker's.
        limit_concurrency=concurrency_limit(settings, open_files),
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=30,
    )


def concurrency_limit(settings: Settings, open_files: int) -> int:
    """`TUCANO_MAX_CONNECTIONS`, kept under the open-files limit: past that, accepting fails for
    every client alike, and the worker's deliveries need descriptors too."""
    cap = settings.max_connections
    room = max(1, open_files // 2)
    if cap > room:
        import structlog

        structlog.get_logger("tucano").warning(
            "max_connections_lowered",
            maxConnections=room,
            configured=cap,
            openFilesLimit=open_files,
            hint="raise the open-files limit (ulimit -n, LimitNOFILE=) to allow more",
        )
        cap = room
    return cap


@processes_app.command("worker")
def worker_command(
    migrate: Annotated[bool, typer.Option(help="Apply pending migrations before starting.")] = True,
    metrics_host: Annotated[
        str,
        typer.Option("--metrics-host", help="Interface to serve /metrics on.", metavar="ADDRESS"),
    ] = "127.0.0.1",
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            help="Port to serve /metrics on (default: TUCANO_METRICS_PORT; unset, none).",
            min=1,
            max=65535,
            metavar="PORT",
        ),
    ] = None,
) -> None:
    """Run only the delivery worker and periodic jobs (for scale-out on PostgreSQL)."""
    from tucano.core.logs import configure_logging
    from tucano.runtime import raise_open_files_limit, size_resolver_threads, tune_garbage_collector

    settings = settings_or_fail()
    port = metrics_port or settings.metrics_port
    if port is not None:
        if not metrics_host.strip():
            fail("--metrics-host must name an interface, such as 127.0.0.1, or 0.0.0.0")
        check_can_listen(metrics_host, port)
    configure_logging(settings.log_level, log_format=settings.log_format)
    prepare_database(settings, migrate=migrate)
    size_resolver_threads()
    tune_garbage_collector()
    raise_open_files_limit()
    metrics_at = None if port is None else (metrics_host, port)
    try:
        import uvloop  # the loop `tucano serve` runs on too
    except ImportError:  # pragma: no cover
        asyncio.run(_run_worker(settings, metrics_at))
    else:
        uvloop.run(_run_worker(settings, metrics_at))


async def _run_worker(settings: Settings, metrics_at: tuple[str, int] | None) -> None:
    from contextlib import AsyncExitStack

    from tucano.db.database import Database
    from tucano.jobs import run_background
    from tucano.metrics.server import serving_metrics

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    database = Database(settings.database_url)
    try:
        async with AsyncExitStack() as stack:
            if metrics_at is not None:
                host, port = metrics_at
                await stack.enter_async_context(
                    serving_metrics(settings, database, host=host, port=port)
                )
            await run_background(database, settings, stop)
    finally:
        await database.dispose()


@processes_app.command("migrate")
def migrate_command() -> None:
    """Apply pending database migrations (safe to run from several processes at once)."""
    from tucano.core.logs import configure_logging

    settings = settings_or_fail()
    configure_logging(settings.log_level, log_format=settings.log_format)
    prepare_database(settings, migrate=True)
    typer.echo(json.dumps({"migrated": True, "database": safe_url(settings.database_url)}))


def exit_cleanly_after_sigterm() -> None:
    """uvicorn shuts down gracefully on SIGTERM and then re-raises the signal to the handler that
    was there before it; make that handler a clean exit, so a graceful stop exits with 0."""
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
