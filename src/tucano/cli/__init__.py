"""The `tucano` command: serve, worker, migrate; clients create / list / revoke; customers set /
show; portal url; secrets reencrypt. Help is plain text (no type tags, ranges whole), a
single-valued option given twice is refused, and every command that uses the database names it
on stderr."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

import tucano
from tucano.cli.clients import clients_app
from tucano.cli.common import fail
from tucano.cli.customers import customers_app
from tucano.cli.pix import pix_app
from tucano.cli.portal import portal_app
from tucano.cli.processes import processes_app
from tucano.cli.secret_keys import secrets_app
from tucano.config import ConfigurationError, metrics_directory

app = typer.Typer(
    name="tucano",
    help="Tucano: payments API for Brazil (webhooks and payment links).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # Every command and group inherits these from the top.
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(processes_app)
app.add_typer(clients_app, name="clients")
app.add_typer(customers_app, name="customers")
app.add_typer(secrets_app, name="secrets")
app.add_typer(pix_app, name="pix")
app.add_typer(portal_app, name="portal")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tucano {tucano.__version__}")
        raise typer.Exit()


@app.callback()
def tucano_command(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Tucano: payments API for Brazil (webhooks and payment links)."""
    # Before any command imports the metrics, which open their files in that directory.
    try:
        metrics_directory()
    except ConfigurationError as exc:
        fail(str(exc))


def repeated_option(command: Any, args: list[str]) -> str | None:
    """The first single-valued option `args` give twice to the command they run (click would
    quietly take the last), or None. A flag and its --no- twin count as one option. (Read off
    the click command Typer builds, by its attributes: Typer may bring a click of its own.)"""
    position = 0
    while isinstance(getattr(command, "commands", None), dict):
        while position < len(args) and args[position].startswith("-"):
            position += 1
        if position == len(args) or args[position] not in command.commands:
            return None
        command = command.commands[args[position]]
        position += 1
    single: dict[str, str] = {}
    for parameter in command.params:
        if parameter.param_type_name == "option" and not (parameter.multiple or parameter.count):
            spelling = "/".join((*parameter.opts, *parameter.secondary_opts))
            for name in (*parameter.opts, *parameter.secondary_opts):
                single[name] = spelling
    seen: set[str] = set()
    for arg in args[position:]:
        if arg == "--":
            break
        option = single.get(arg.split("=", 1)[0])
        if option is None:
            continue
        if option in seen:
            return option
        seen.add(option)
    return None


def main() -> None:
    twice = repeated_option(typer.main.get_command(app), sys.argv[1:])
    try:
        if twice is not None:
            fail(f"{twice} is given more than once; give it once")
        app()
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
