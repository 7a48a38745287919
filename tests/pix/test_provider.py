"""The Pix provider chosen at start-up: what the checkout offers with each, and which ones a
production service refuses."""

from __future__ import annotations

import pytest

from tests.support.payer import Payer, checkout_path, hidden_token
from tests.support.payment_links import create
from tests.support.service import serving
from tests.support.settings import TEST_SECRET_KEY, make_settings
from tucano.config import PixProviderName, Settings
from tucano.db.database import Database


def test_the_default_is_the_sandbox_in_sandbox_and_events_in_production() -> None:
    assert Settings(environment="sandbox").pix_provider_name is PixProviderName.SANDBOX
    production = Settings(
        environment="production", secret_key=TEST_SECRET_KEY, public_url="https://pay.example.com"
    )
    assert production.pix_provider_name is PixProviderName.EVENTS


def test_production_refuses_the_simulated_provider() -> None:
    with pytest.raises(ValueError, match="TUCANO_PIX_PROVIDER=sandbox"):
        Settings(
            environment="production",
            secret_key=TEST_SECRET_KEY,
            public_url="https://pay.example.com",
            pix_provider="sandbox",
        )


async def test_with_events_the_page_offers_the_code_and_no_simulated_payment(
    database_url: str, database: Database
) -> None:
    settings = make_settings(database_url, pix_provider="events")
    async with serving(settings, database) as service:
        link = await create(await service.merchant())
        payer = Payer(service, link)
        page = await payer.page()
        assert "00020101021226" in page  # the static BR Code, as before
        assert "data-simulate" not in page
        # Nor does a hand-made form pay it: only the provider's events do.
        path, _, query = checkout_path(link).partition("?")
        refused = await payer.http.post(
            f"{path}/pix/simulate?{query}",
            data={"csrf_token": hidden_token(page)},
            headers=payer.headers,
        )
        assert refused.status_code == 403
        assert "data-card-form" in await payer.page()  # still open: nothing paid it
        await payer.close()
