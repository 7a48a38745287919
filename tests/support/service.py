"""What the tests share: a real Tucano server on a loopback port, and a way to get a token."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from tucano.app import create_app
from tucano.auth.service import create_client
from tucano.auth.tokens import MERCHANT_SCOPES, Scope
from tucano.config import Settings
from tucano.db.database import Database

# An empty result, exactly as spec 2.2 describes it (default page and size).
EMPTY_PAGE = {
    "content": [],
    "totalElements": 0,
    "totalPages": 0,
    "size": 20,
    "number": 0,
    "first": True,
    "last": True,
    "empty": True,
}


def new_customer_id() -> int:
    """A customer no other test uses, so tests never see each other's data."""
    return secrets.randbelow(2**40) + 1000


@dataclass
class RunningService:
    """A `create_app()` served by uvicorn on 127.0.0.1 in the test's event loop."""

    app: FastAPI
    server: uvicorn.Server
    task: asyncio.Task[None]
    base_url: str
    database: Database
    settings: Settings
    http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=30)

    async def client_credentials(
        self,
        *,
        customer_id: int | None = None,
        scopes: Iterable[Scope] = MERCHANT_SCOPES,
        partner_id: int | None = None,
    ) -> tuple[str, str, int]:
        customer_id = customer_id or new_customer_id()
        async with self.database.session() as session:
            client, secret = await create_client(
                session, customer_id=customer_id, partner_id=partner_id, scopes=scopes
            )
            await session.commit()
        return client.client_id, secret, customer_id

    async def token(
        self,
        *,
        customer_id: int | None = None,
        scopes: Iterable[Scope] = MERCHANT_SCOPES,
        partner_id: int | None = None,
    ) -> str:
        client_id, secret, _ = await self.client_credentials(
            customer_id=customer_id, scopes=scopes, partner_id=partner_id
        )
        return await self.token_of(client_id, secret)

    async def token_of(self, client_id: str, secret: str) -> str:
        """A new access token of an existing client."""
        response = await self.http.post(
            "/oauth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": client_id,
                "client_secret": secret,
            },
        )
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    async def merchant(self, **kwargs: Any) -> Merchant:
        customer_id = kwargs.pop("customer_id", None) or new_customer_id()
        token = await self.token(customer_id=customer_id, **kwargs)
        return Merchant(self, customer_id, token)

    async def stop(self) -> None:
        await self.http.aclose()
        self.server.should_exit = True
        await self.task


@dataclass
class Merchant:
    """One customer's authenticated view of the API."""

    service: RunningService
    customer_id: int
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return await self.service.http.request(method, path, headers=headers, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", path, **kwargs)

    async def put(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PUT", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", path, **kwargs)


async def start_service(
    settings: Settings, database: Database, *, background: bool = False
) -> RunningService:
    """Serve the app; `background` also runs its delivery worker and periodic jobs (only one
    service with background loops may run per database, or they would share its queue)."""
    app = create_app(settings, database=database, background=background)
    # The test client keeps its connections; with uvicorn's 5 s keep-alive, one reused just as
    # the server closed it after a pause (a test's slow teardown) failed with a ReadError.
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_keep_alive=300,
    )
    server = uvicorn.Server(config)
    # The test runner owns the signals; uvicorn must not take them over.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return RunningService(
        app=app,
        server=server,
        task=task,
        base_url=f"http://127.0.0.1:{port}",
        database=database,
        settings=settings,
    )


class NoDatabase:
    """Stands in for `app.state.database` where a request must do no database work."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the database was used ({name})")


@contextlib.asynccontextmanager
async def database_swapped(service: RunningService, database: Any) -> AsyncIterator[None]:
    """`service` answering on `database` (one that cannot be reached, say) while inside."""
    serving_database = service.app.state.database
    service.app.state.database = database
    try:
        yield
    finally:
        service.app.state.database = serving_database


@contextlib.asynccontextmanager
async def serving(settings: Settings, database: Database) -> AsyncIterator[RunningService]:
    """A service of one test's own (its settings, its rate-limit counts), stopped after it."""
    running = await start_service(settings, database)
    try:
        yield running
    finally:
        await running.stop()


def assert_error_body(
    response: httpx.Response, status: int, error_code: int | None = None
) -> dict[str, Any]:
    """The one error body of decisions.md, with its status and (optionally) its code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"errorCode", "message", "timestamp", "xTransactionId", "errors"}, body
    assert isinstance(body["errorCode"], int)
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["errors"], list)
    assert body["xTransactionId"] == response.headers["x-transaction-id"]
    assert len(body["timestamp"]) == 24 and body["timestamp"].endswith("Z")
    if error_code is not None:
        assert body["errorCode"] == error_code, body
    return dict(body)
