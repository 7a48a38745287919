"""`tucano clients`: the API clients whose credentials POST /oauth/v1/token takes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tucano.auth.tokens import Scope
from tucano.cli.common import (
    CustomerId,
    _within_ids,
    fail,
    prepare_database,
    run_on_database,
    settings_or_fail,
)

if TYPE_CHECKING:
    from tucano.auth.models import ApiClient

clients_app = typer.Typer(
    help="Manage API clients (credentials for POST /oauth/v1/token).", rich_markup_mode=None
)
SCOPE_HELP = "A scope to grant (repeatable): one of the scopes listed above."
# The scopes are listed one a line, kept as written (\b): wrapped, one split at its hyphen.
CREATE_HELP = (
    "Create an API client and print its credentials once, as one JSON object.\n\n"
    "Without --scope a client gets the five merchant scopes (webhook.*, payment-link.* and "
    "portal.session); "
    "events.publish, for the provider's own systems that publish events, only when asked for."
    "\n\n\b\nScopes:\n" + "\n".join(f"  {scope.value}" for scope in Scope)
)


@clients_app.command("create", help=CREATE_HELP)
def create_client_command(
    customer_id: CustomerId,
    partner_id: Annotated[
        int | None,
        typer.Option(
            "--partner-id", help="Partner, if any.", min=1, metavar="N", callback=_within_ids
        ),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help=SCOPE_HELP, metavar="SCOPE"),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="A label for the client.", metavar="TEXT")
    ] = None,
    migrate: Annotated[
        bool,
        typer.Option(
            help="Apply pending migrations first, making the database if there is none "
            "(without it, a database that is not there or not migrated is an error)."
        ),
    ] = False,
) -> None:
    """Create an API client and print its credentials once, as one JSON object."""
    from tucano.auth.service import create_client, parse_scopes
    from tucano.auth.tokens import MERCHANT_SCOPES
    from tucano.db.database import Database

    if name is not None and not name.strip():
        fail("--name must not be empty (leave it out for no label)")
    settings = settings_or_fail()
    try:
        scopes = parse_scopes(scope) if scope is not None else MERCHANT_SCOPES
    except ValueError as exc:
        fail(str(exc))
    prepare_database(settings, migrate=migrate)

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

    typer.echo(json.dumps(run_on_database(run)))


def client_summary(client: ApiClient) -> dict[str, object]:
    from tucano.core.clock import format_utc

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
        typer.Option(
            "--customer-id",
            help="Only this customer's clients.",
            min=1,
            metavar="N",
            callback=_within_ids,
        ),
    ] = None,
) -> None:
    """Print every API client (secrets are not kept), oldest first, one JSON object a line."""
    from tucano.auth.service import list_clients
    from tucano.db.database import Database

    settings = settings_or_fail()
    prepare_database(settings, migrate=False)

    async def run() -> list[dict[str, object]]:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.read_session() as session:
                return [
                    client_summary(c) for c in await list_clients(session, customer_id=customer_id)
                ]
        finally:
            await database.dispose()

    for line in run_on_database(run):
        typer.echo(json.dumps(line))


@clients_app.command("revoke")
def revoke_client_command(
    client_id: Annotated[
        str, typer.Argument(help="The clientId to revoke (tci_...).", metavar="CLIENT_ID")
    ],
) -> None:
    """Revoke an API client: it gets no more tokens, and the tokens it holds stop working in
    every process within seconds. There is no undoing it: create a new client instead."""
    from tucano.auth.service import revoke_client
    from tucano.core.clock import clock
    from tucano.db.database import Database

    settings = settings_or_fail()
    prepare_database(settings, migrate=False)

    async def run() -> dict[str, object] | None:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.session() as session:
                client = await revoke_client(session, client_id=client_id, now=clock.now())
                await session.commit()
                return None if client is None else client_summary(client)
        finally:
            await database.dispose()

    revoked = run_on_database(run)
    if revoked is None:
        fail(f"no API client has the id {client_id!r}")
    typer.echo(json.dumps(revoked))
