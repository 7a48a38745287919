"""`tucano portal url`: a merchant portal session URL, for an operator to open or hand over."""

from __future__ import annotations

from typing import Annotated

import typer

from tucano.cli.common import CustomerId, fail, prepare_database, run_on_database, settings_or_fail

portal_app = typer.Typer(
    help="The merchant portal: session URLs for operators.", rich_markup_mode=None
)


@portal_app.command("url")
def portal_url_command(
    customer_id: CustomerId,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only", help="A session that shows no actions, and refuses them (403)."
        ),
    ] = False,
    ttl: Annotated[
        str,
        typer.Option(
            "--ttl",
            metavar="DURATION",
            help="How long the URL, and the session it opens, last: from 60s to 24h (such as "
            "90s, 15m, 1h).",
        ),
    ] = "1h",
    locale: Annotated[
        str | None,
        typer.Option(
            "--locale",
            metavar="LOCALE",
            help="pt-BR or en; left out, the browser's Accept-Language decides.",
        ),
    ] = None,
) -> None:
    """Print a URL that opens the customer's portal once, until it expires (said on stderr)."""
    from tucano.core.clock import clock, format_utc
    from tucano.core.languages import LANGUAGES
    from tucano.db.database import Database
    from tucano.portal import service
    from tucano.setting_values import parse_duration

    try:
        lifetime = parse_duration(ttl)
    except ValueError as exc:
        fail(f"--ttl: {exc}")
    if not service.SHORTEST_LIFETIME <= lifetime <= service.LONGEST_LIFETIME:
        fail(f"--ttl must be from 60s to 24h, not {ttl.strip()}")
    language = next((known for known in LANGUAGES if known == locale), None)
    if locale is not None and language is None:
        fail(f"--locale must be one of {', '.join(LANGUAGES)}, not {locale[:20]!r}")
    settings = settings_or_fail()
    prepare_database(settings, migrate=False)

    async def run() -> service.SessionUrl:
        database = Database(settings.database_url, pool_size=1)
        try:
            async with database.session() as session:
                made = await service.open_session_url(
                    session,
                    customer_id=customer_id,
                    public_url=settings.public_url,
                    now=clock.now(),
                    lifetime=lifetime,
                    read_only=read_only,
                    locale=language,
                )
                await session.commit()
                return made
        finally:
            await database.dispose()

    made = run_on_database(run)
    typer.echo(made.url)
    typer.echo(f"opens once, until {format_utc(made.expires_at)}", err=True)
