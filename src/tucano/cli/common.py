"""What every `tucano` command shares: failing in one line, the settings, the database it works
on (named on stderr, checked or migrated before use), and the options that name customers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from tucano.config import ConfigurationError, Settings, load_settings

T = TypeVar("T")

# Ids are 64-bit signed integers in the database.
MAX_ID = 2**63 - 1


def fail(message: str) -> NoReturn:
    typer.echo(f"tucano: {message}", err=True)
    raise typer.Exit(code=2)


def _within_ids(value: int | None) -> int | None:
    if value is not None and value > MAX_ID:
        raise typer.BadParameter(f"must be at most {MAX_ID}")
    return value


CustomerId = Annotated[
    int,
    typer.Option(
        "--customer-id", help="The customer (merchant).", min=1, metavar="N", callback=_within_ids
    ),
]


def settings_or_fail() -> Settings:
    try:
        return load_settings()
    except ConfigurationError as exc:
        fail(str(exc))


def safe_url(url: str) -> str:
    """The URL to show: its password hidden, in the user part or in the query; an SQLite file by
    its absolute path."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite") and parsed.database:
        parsed = parsed.set(database=str(Path(parsed.database).resolve()))
    hidden = {key: "hidden" for key in parsed.query if "pass" in key.lower()}
    return parsed.update_query_dict(hidden).render_as_string(hide_password=True)


def prepare_database(settings: Settings, *, migrate: bool) -> None:
    """Say which database the command works on; then migrate it, or check that nothing is
    pending (a process never starts on a schema it cannot run on: it would fail request by
    request, saying why nowhere). Without migrating, an SQLite file that is not there is not
    made: the command would work on a new, empty database beside the real one."""
    from sqlalchemy.engine import make_url

    from tucano.core.logs import exception_summary
    from tucano.migrations import schema_problem, upgrade

    shown_url = safe_url(settings.database_url)
    typer.echo(f"database: {shown_url}", err=True)
    parsed = make_url(settings.database_url)
    sqlite_file = parsed.database if parsed.drivername.startswith("sqlite") else None
    if not migrate and sqlite_file and not Path(sqlite_file).exists():
        fail(
            f"the database {shown_url} does not exist: run `tucano migrate` (or `tucano serve`) "
            "in the directory it belongs to, or set TUCANO_DATABASE_URL"
        )
    try:
        problem = schema_problem(settings.database_url, migrating=migrate)
    except Exception as exc:
        fail(f"could not reach the database: {exception_summary(exc)}")
    if problem:
        fail(problem)
    if migrate:
        try:
            key = settings.secret_key
            upgrade(settings.database_url, secret_key=key.get_secret_value() if key else None)
        except Exception as exc:
            fail(f"could not migrate the database: {exception_summary(exc)}")


def run_on_database(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """asyncio.run(work()), failing in one line if the database cannot be used (locked by
    another process for longer than the busy timeout, say) rather than with a traceback."""
    from tucano.core.logs import exception_summary

    try:
        return asyncio.run(work())
    except Exception as exc:
        fail(f"could not use the database: {exception_summary(exc)[:300]}")


def option_problem(error: dict[str, Any]) -> str:
    """A validation error of a command's option, in the words of the API's errors."""
    from tucano.api.errors import describe_validation_error

    option = "--" + str(error["loc"][0]).replace("_", "-")
    said = describe_validation_error({**error, "loc": (option,)})
    return f"{option}: {said.removeprefix(option).strip()}"
