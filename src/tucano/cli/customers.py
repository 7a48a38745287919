"""`tucano customers`: merchant profiles, what a payer's checkout shows and its BR Code carries."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tucano.cli.common import (
    CustomerId,
    fail,
    option_problem,
    prepare_database,
    run_on_database,
    settings_or_fail,
)

customers_app = typer.Typer(
    help="Merchant profiles: the name, city and Pix key a payer's checkout shows and pays.",
    rich_markup_mode=None,
)


@customers_app.command("set")
def set_customer_command(
    customer_id: CustomerId,
    merchant_name: Annotated[
        str,
        typer.Option(
            "--merchant-name",
            metavar="TEXT",
            help="The name payers see (the BR Code carries it without accents, at most 25 "
            "characters).",
        ),
    ],
    merchant_city: Annotated[
        str,
        typer.Option(
            "--merchant-city",
            metavar="TEXT",
            help="The merchant's city (the BR Code carries at most 15 characters).",
        ),
    ],
    pix_key: Annotated[
        str | None,
        typer.Option(
            "--pix-key",
            metavar="KEY",
            help="The Pix key payments go to: a CPF, CNPJ, +55 mobile number, e-mail or random "
            "key. Without one, production offers no PIX. Left out: the stored key is kept.",
        ),
    ] = None,
    clear_pix_key: Annotated[
        bool, typer.Option("--clear-pix-key", help="Remove the stored Pix key.")
    ] = False,
    mcc: Annotated[
        str | None,
        typer.Option(
            "--mcc", metavar="NNNN", help="Merchant category code, 4 digits (default 0000)."
        ),
    ] = None,
) -> None:
    """Create or change a customer's merchant profile and print it as one JSON object."""
    from pydantic import ValidationError

    from tucano.core.clock import clock
    from tucano.customers.schemas import MerchantProfileInput
    from tucano.customers.service import profile_summary, set_profile
    from tucano.db.database import Database

    if pix_key is not None and clear_pix_key:
        fail("give --pix-key or --clear-pix-key, not both")
    try:
        profile = MerchantProfileInput(
            merchant_name=merchant_name, merchant_city=merchant_city, pix_key=pix_key, mcc=mcc
        )
    except ValidationError as exc:
        fail("; ".join(option_problem(dict(error)) for error in exc.errors()))
    settings = settings_or_fail()
    prepare_database(settings, migrate=False)

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

    typer.echo(json.dumps(run_on_database(run), ensure_ascii=False))


@customers_app.command("show")
def show_customer_command(
    customer_id: CustomerId,
) -> None:
    """Print a customer's merchant profile as one JSON object."""
    from tucano.customers.service import get_profile, profile_summary
    from tucano.db.database import Database

    settings = settings_or_fail()
    prepare_database(settings, migrate=False)

    async def run() -> dict[str, object] | None:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.read_session() as session:
                stored = await get_profile(session, customer_id=customer_id)
                return None if stored is None else profile_summary(stored)
        finally:
            await database.dispose()

    profile = run_on_database(run)
    if profile is None:
        sandbox = " (its sandbox checkout shows TUCANO SANDBOX)" if settings.is_sandbox else ""
        fail(
            f"customer {customer_id} has no merchant profile{sandbox}: "
            "set one with tucano customers set"
        )
    typer.echo(json.dumps(profile, ensure_ascii=False))
