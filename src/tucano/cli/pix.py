"""`tucano pix`: the merchant's PSP, for the `api-pix` Pix provider."""

from __future__ import annotations

import json
import sys

import typer

from tucano.cli.common import CustomerId, fail, prepare_database, run_on_database, settings_or_fail

pix_app = typer.Typer(help="The merchant's PSP, for TUCANO_PIX_PROVIDER=api-pix.")
webhook_app = typer.Typer(help="The webhook the PSP calls when a charge is paid.")
pix_app.add_typer(webhook_app, name="webhook")

WEBHOOK_PATH = "/pix-provider/v1/webhook"  # the PSP appends /pix


@webhook_app.command("register")
def register_webhook_command(customer_id: CustomerId) -> None:
    """Register Tucano's webhook at the PSP for the customer's Pix key (PUT /webhook/{key})."""
    from tucano.config import PixProviderName
    from tucano.core.logs import configure_logging
    from tucano.customers.service import get_profile
    from tucano.db.database import Database
    from tucano.pix.api_pix_client import ApiPixClient
    from tucano.pix.api_pix_schemas import PspFailure

    settings = settings_or_fail()
    # Its answer is stdout's; the client's lines go to stderr.
    configure_logging(settings.log_level, log_format=settings.log_format, stream=sys.stderr)
    if settings.pix_provider_name is not PixProviderName.API_PIX:
        fail("the PSP's webhook is for TUCANO_PIX_PROVIDER=api-pix; set it and its TUCANO_PIX_*")
    prepare_database(settings, migrate=False)
    secret = settings.pix_webhook_secret
    assert secret is not None  # required with api-pix (config.py)
    url = f"{settings.public_url}{WEBHOOK_PATH}?hmac={secret.get_secret_value()}"

    async def run() -> tuple[str | None, str | None]:
        """The key registered, or why none was."""
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.read_session() as session:
                profile = await get_profile(session, customer_id=customer_id)
        finally:
            await database.dispose()
        if profile is None or not profile.pix_key:
            return None, (
                f"customer {customer_id} has no Pix key: set one with "
                "tucano customers set --pix-key"
            )
        client = ApiPixClient.from_settings(settings)
        try:
            await client.put_webhook(profile.pix_key, url)
        except PspFailure as failure:
            return None, f"the PSP did not register the webhook: {failure}"
        finally:
            await client.close()
        return profile.pix_key, None

    key, problem = run_on_database(run)
    if key is None:
        fail(problem or "the webhook was not registered")
    typer.echo(
        json.dumps({"customerId": customer_id, "pixKey": key, "webhookUrl": url.split("?")[0]})
    )
