"""`tucano secrets`: the secrets stored sealed under TUCANO_SECRET_KEY, after a change of key."""

from __future__ import annotations

import json

import typer

from tucano.cli.common import fail, prepare_database, run_on_database, settings_or_fail

secrets_app = typer.Typer(
    help="Secrets stored sealed (webhook signing secrets): re-encrypt them after a key change.",
    rich_markup_mode=None,
)


@secrets_app.command("reencrypt")
def reencrypt_command() -> None:
    """Seal every stored secret under TUCANO_SECRET_KEY where one of
    TUCANO_PREVIOUS_SECRET_KEYS sealed it; print how many webhooks changed, as one JSON object."""
    from tucano.core.secret_box import SecretBoxError
    from tucano.db.database import Database
    from tucano.webhooks.secret_store import load_secret_store
    from tucano.webhooks.service import reseal_all

    settings = settings_or_fail()
    prepare_database(settings, migrate=False)

    async def run() -> dict[str, object] | str:
        database = Database(settings.database_url, pool_size=1)
        try:
            store = await load_secret_store(settings, database)
            async with database.session() as session:
                try:
                    resealed = await reseal_all(session, store)
                except SecretBoxError as exc:  # nothing written: the transaction rolls back
                    return str(exc)
                await session.commit()
            return {"webhooksResealed": resealed, "keyId": store.box.current_key_id}
        finally:
            await database.dispose()

    done = run_on_database(run)
    if isinstance(done, str):
        fail(done)
    typer.echo(json.dumps(done))
