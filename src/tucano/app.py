"""create_app(): the FastAPI application with its routers, error handling and lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

import tucano
from tucano.api.docs_pages import OPENAPI_URL, add_docs
from tucano.api.edge import EdgeMiddleware
from tucano.api.errors import install_error_handlers
from tucano.api.peer_limits import PeerLimitMiddleware
from tucano.api.rate_limits import RateLimits
from tucano.auth.deps import Callers
from tucano.auth.router import router as auth_router
from tucano.auth.service import RevokedClients, resolve_secret_key
from tucano.auth.tokens import derive_key
from tucano.checkout.card_budgets import KEY_PURPOSE as CARD_BUDGET_KEY_PURPOSE
from tucano.checkout.card_processor import CardProcessorError, load_card_processor
from tucano.checkout.csrf import KEY_PURPOSE as CSRF_KEY_PURPOSE
from tucano.checkout.deps import Checkouts
from tucano.checkout.rendering import CheckoutHeaders
from tucano.checkout.router import router as checkout_router
from tucano.config import ConfigurationError, Settings, load_settings
from tucano.db.database import Database
from tucano.deliveries.router import router as deliveries_router
from tucano.deliveries.router import webhook_deletion
from tucano.health.router import router as health_router
from tucano.ingest.router import router as events_router
from tucano.jobs import run_background
from tucano.metrics.router import router as metrics_router
from tucano.openapi import document_deliveries, openapi_document, operation_id
from tucano.payment_links.checkout_tokens import KEY_PURPOSE as CHECKOUT_KEY_PURPOSE
from tucano.payment_links.deps import PaymentLinks
from tucano.payment_links.router import router as payment_links_router
from tucano.pix.provider import pix_provider_for
from tucano.pix.psp import charges_at_psp
from tucano.pix.router import router as pix_provider_router
from tucano.portal.deps import KEY_PURPOSE as PORTAL_CSRF_KEY_PURPOSE
from tucano.portal.deps import Portal
from tucano.portal.rendering import PortalHeaders
from tucano.portal.router import router as portal_router
from tucano.refunds.refunder import Refunder
from tucano.refunds.router import router as refunds_router
from tucano.webhooks.router import router as webhooks_router
from tucano.webhooks.secret_store import WebhookSecretStore

DESCRIPTION = """\
Tucano is a payments API for Brazil.

* **Webhooks** (`/webhook/v1`): register target URLs per event type; Tucano POSTs each event,
  signed per Standard Webhooks, and retries a failed delivery on `TUCANO_RETRY_SCHEDULE` (eight
  attempts over about a day by default) before giving it up as `EXHAUSTED`.
* **Payment links** (`/payment-link/v1`): create a link for a payer and an amount, list, read and
  report on links. `urlPayment` opens the link's checkout page, where the payer pays by PIX (QR
  code or copy-and-paste code) or by card in up to 10 instalments, and which then shows the
  receipt; the merchant hears of it by a `PAYMENT_LINK_INBOUND` webhook. In sandbox, a link
  whose amount ends in 01 cents is paid by PIX on its own, and test cards are accepted.
* **Merchant portal** (`/portal/v1/sessions`): a one-time URL that opens a merchant's own portal
  in a browser or in an iframe of the operator's dashboard.
* **Authentication**: `POST /oauth/v1/token` with client credentials gives a bearer token.

Every error has one body: `errorCode`, `message`, `timestamp`, `xTransactionId`, `errors`.
"""


def create_app(
    settings: Settings | None = None,
    *,
    database: Database | None = None,
    background: bool = True,
) -> FastAPI:
    """The application; with `background`, the delivery worker and periodic jobs run beside it.
    The database must already be migrated (`tucano migrate`, or `tucano serve`, which migrates)."""
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # What routes are given by their typed dependencies (api.deps.provided), by name.
        db = database or Database(settings.database_url)
        app.state.database = db
        secret_key = await resolve_secret_key(settings, db)
        checkout_key = derive_key(secret_key, CHECKOUT_KEY_PURPOSE)
        app.state.payment_links = PaymentLinks.of(settings, db, checkout_key)
        app.state.webhook_secret_store = WebhookSecretStore.of(secret_key, settings)
        # Here, not in create_app: a Redis client belongs to the event loop that serves.
        rate_limits = RateLimits(settings)
        # Checkout tokens in links payers hold outlive a change of key; access tokens do not.
        app.state.checkouts = Checkouts.of(
            settings,
            db,
            csrf_key=derive_key(secret_key, CSRF_KEY_PURPOSE),
            keys=[
                checkout_key,
                *(
                    derive_key(key.get_secret_value().encode(), CHECKOUT_KEY_PURPOSE)
                    for key in settings.previous_secret_keys
                ),
            ],
            card_processor=card_processor,
            rate_limits=rate_limits,
            card_budget_key=derive_key(secret_key, CARD_BUDGET_KEY_PURPOSE),
            pix=pix_provider,
        )
        app.state.portal = Portal.of(
            settings, db, csrf_key=derive_key(secret_key, PORTAL_CSRF_KEY_PURPOSE)
        )
        revoked = RevokedClients()
        app.state.callers = Callers(
            access_token_key=derive_key(secret_key, "access-token"),
            revoked_clients=revoked,
            rate_limits=rate_limits,
        )
        await revoked.refresh_at_start(db)
        stop = asyncio.Event()
        watch_revocations = asyncio.create_task(
            revoked.keep_fresh(db, stop), name="revoked-clients"
        )
        loops = (
            asyncio.create_task(
                run_background(db, settings, stop, secret_store=app.state.webhook_secret_store),
                name="background",
            )
            if background
            else None
        )
        try:
            yield
        finally:
            # Requests in flight are done by now (uvicorn drains them before the lifespan ends).
            stop.set()
            await watch_revocations
            if loops is not None:
                await loops
            await rate_limits.close()
            if refunds_psp is not None:
                await refunds_psp.close()
            if database is None:
                await db.dispose()

    app = FastAPI(
        title="Tucano",
        version=tucano.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        redirect_slashes=False,
        generate_unique_id_function=operation_id,
        docs_url=None,
        redoc_url=None,
        openapi_url=OPENAPI_URL if settings.docs_are_enabled else None,
    )
    app.state.settings = settings
    try:
        card_processor = load_card_processor(settings)
    except CardProcessorError as exc:
        raise ConfigurationError(str(exc)) from None
    # Before serving: a provider that cannot run stops it. Its PSP client serves refunds.
    refunds_psp = charges_at_psp(settings)
    pix_provider = pix_provider_for(settings, refunds_psp)
    app.state.refunder = Refunder(card=card_processor, pix=pix_provider)
    # Inside the edge, so that its refusals carry a transaction id and are logged and counted.
    app.add_middleware(PeerLimitMiddleware, max_requests_per_peer=settings.max_requests_per_peer)
    app.add_middleware(
        EdgeMiddleware,
        max_body_bytes=settings.max_request_body_bytes,
        body_timeout_seconds=settings.request_body_timeout_seconds,
    )
    # Outside the edge, so that the answers it makes itself carry them too.
    app.add_middleware(CheckoutHeaders, https=settings.public_url.startswith("https://"))
    app.add_middleware(PortalHeaders, settings=settings)
    install_error_handlers(app)
    app.include_router(auth_router)
    app.include_router(deliveries_router)
    app.include_router(webhooks_router)
    app.include_router(webhook_deletion)
    app.include_router(events_router)
    app.include_router(payment_links_router)
    app.include_router(refunds_router)
    app.include_router(checkout_router)
    app.include_router(pix_provider_router)
    app.include_router(portal_router)
    document_deliveries(app)
    app.include_router(health_router)
    app.include_router(metrics_router)
    add_docs(app, enabled=settings.docs_are_enabled)

    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
    return app
