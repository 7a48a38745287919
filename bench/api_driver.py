"""The ceilings `bench/api.py` serves beside Tucano, each on uvicorn in a process of its own:

- bare: one GET route returning a small JSON (the ratio base of issue 28);
- driver: Tucano's operations with the least code: the same statements (bench/api_driver_sql.py)
  straight through the driver (an asyncpg pool of Tucano's size, or one aiosqlite connection
  with Tucano's pragmas), no ORM, no authentication, no Pydantic models; rows leave as orjson
  renders them. Same paths as Tucano's, so the same load drives both.

The database and the customer come from BENCH_API_DATABASE_URL and BENCH_API_CUSTOMER_ID."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from bench import api_driver_sql as sql
from bench.api_data import sqlite_path
from tucano.brazil.brasilia_time import brasilia_date, brasilia_day_of_text

POOL_SIZE = 10  # Tucano's (db.database.Database)


def bare_app() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _json(value: Any) -> Response:
    return Response(orjson.dumps(value, default=str), media_type="application/json")


class Postgres:
    """Statements through an asyncpg pool; `:name` parameters bound by name."""

    def __init__(self, url: str) -> None:
        self.url = url.replace("postgresql+asyncpg://", "postgresql://")
        self.pool: Any = None
        self.statements: dict[str, tuple[str, list[str]]] = {}

    async def open(self) -> None:
        import asyncpg

        async def setup(connection: Any) -> None:
            await connection.execute("SET jit = off")  # as Tucano's connections run

        self.pool = await asyncpg.create_pool(
            self.url, min_size=POOL_SIZE, max_size=POOL_SIZE, init=setup
        )

    async def close(self) -> None:
        await self.pool.close()

    def _args(self, statement: str, values: dict[str, Any]) -> tuple[str, list[Any]]:
        if statement not in self.statements:
            self.statements[statement] = sql.numbered(statement)
        text, names = self.statements[statement]
        return text, [values[name] for name in names]

    async def fetch(self, statement: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        text, args = self._args(statement, values)
        async with self.pool.acquire() as connection:
            return [dict(record) for record in await connection.fetch(text, *args)]

    async def create(self, values: dict[str, Any]) -> bytes | None:
        text, args = self._args(sql.CREATE_ON_POSTGRES, values)
        async with self.pool.acquire() as connection:
            created = await connection.fetchval(text, *args)
            if created:
                return None
            stored = await connection.fetchrow(*self._args(sql.FIND_KEY, values))
        return None if stored is None else str(stored["response"]).encode()


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return value.hex
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    if isinstance(value, date):
        return value.isoformat()
    return value


class Sqlite:
    """Statements on one aiosqlite connection; writes one transaction at a time."""

    def __init__(self, url: str) -> None:
        self.path = sqlite_path(url)
        self.connection: Any = None
        self.writing = asyncio.Lock()

    async def open(self) -> None:
        import aiosqlite

        self.connection = await aiosqlite.connect(self.path, isolation_level=None)
        self.connection.row_factory = sqlite3.Row
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            await self.connection.execute(f"PRAGMA {pragma}")
        await self.connection.execute("PRAGMA busy_timeout=10000")
        # Tucano registers it too (db.engines): SQLite has no time-zone database.
        await self.connection.create_function(
            "brasilia_day", 1, brasilia_day_of_text, deterministic=True
        )

    async def close(self) -> None:
        await self.connection.close()

    async def fetch(self, statement: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        bound = {name: _sqlite_value(value) for name, value in values.items()}
        async with self.connection.execute(statement, bound) as cursor:
            return [dict(row) for row in await cursor.fetchall()]

    async def create(self, values: dict[str, Any]) -> bytes | None:
        bound = {name: _sqlite_value(value) for name, value in values.items()}
        async with self.writing:
            await self.connection.execute("BEGIN IMMEDIATE")
            try:
                async with self.connection.execute(sql.FIND_KEY, bound) as cursor:
                    stored = await cursor.fetchone()
                if stored is None:
                    async with self.connection.execute(sql.REMEMBER_KEY, bound) as cursor:
                        await cursor.fetchone()
                    await self.connection.execute(sql.INSERT_LINK, bound)
                    await self.connection.execute(sql.INSERT_CHANGE, bound)
                await self.connection.execute("COMMIT")
            except BaseException:
                await self.connection.execute("ROLLBACK")
                raise
        return None if stored is None else str(stored["response"]).encode()


def _new_link(customer_id: int, body: bytes) -> tuple[dict[str, Any], bytes]:
    """The values of a link made from a create body, and the answer to it."""
    data = orjson.loads(body)
    now = datetime.now(UTC)
    link = {
        "uuid": uuid.uuid4(),
        "customer_id": customer_id,
        "payer_name": data["payerName"],
        "registration_number": data["registrationNumber"],
        "amount_cents": round(float(data["amount"]) * 100),
        "numbers_installments": data["numbersInstallments"],
        "description": data.get("description"),
        "user_reference": data.get("userReference"),
        "expiration_days": data["expirationDays"],
        "verification_token": 100_000 + secrets.randbelow(900_000),
        "status": "CREATED",
        "created_at": now,
        "expires_at": now + timedelta(days=data["expirationDays"]),
        "autopay_at": None,
        "pix_txid": secrets.token_hex(12).upper() + "X",
    }
    return link, orjson.dumps(link)


def driver_app() -> FastAPI:
    url = os.environ["BENCH_API_DATABASE_URL"]
    customer = int(os.environ["BENCH_API_CUSTOMER_ID"])
    database = Postgres(url) if url.startswith("postgresql") else Sqlite(url)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await database.open()
        yield
        await database.close()

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    page = sql.list_page("postgresql" if isinstance(database, Postgres) else "sqlite")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/webhook/v1/list")
    async def list_webhooks() -> Response:
        rows = await database.fetch(sql.LIST_WEBHOOKS, {"customer": customer})
        for row in rows:
            del row["secret"], row["previous_secrets"]
        return _json({"content": rows, "totalElements": rows[0]["total"] if rows else 0})

    @app.get("/payment-link/v1/link-payment")
    async def list_links(request: Request) -> Response:
        start = date.fromisoformat(request.query_params["startDate"])
        end = date.fromisoformat(request.query_params["endDate"])
        values = {"customer": customer, **sql.list_values(start, end, datetime.now(UTC))}
        rows = await database.fetch(page, values)
        return _json({"content": rows, "totalElements": rows[0]["matched_total"] if rows else 0})

    @app.get("/payment-link/v1/{link}")
    async def read_link(link: str) -> Response:
        values = {"link_uuid": uuid.UUID(link), "customer": customer}
        rows = await database.fetch(sql.READ_LINK, values)
        if not rows:
            return Response(status_code=404)
        return _json(rows[0])

    @app.post("/payment-link/v1")
    async def create_link(request: Request) -> Response:
        body = await request.body()
        link, answer = _new_link(customer, body)
        values = {
            **link,
            "key": uuid.UUID(request.headers["x-transaction-id"]),
            "fingerprint": hashlib.sha256(body).hexdigest(),
            "response": answer.decode(),
            "window_start": link["created_at"] - timedelta(hours=24),
            "day": brasilia_date(link["created_at"]),
        }
        stored = await database.create(values)
        return Response(stored or answer, media_type="application/json")

    return app
