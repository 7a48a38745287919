"""Tucano's client of a PSP's API Pix v2 (the Banco Central's standard): immediate charges
(`cob`), refunds (`devolucao`) and the webhook, over mutual TLS with an OAuth2 token
(api_pix_auth.py).

Every call here is idempotent (a PUT or PATCH by an id Tucano chose, or a GET), so a 5xx, a 429,
a timeout or a lost connection is retried with exponential backoff and jitter; other 4xx are
not. A 401 drops the token and the call is made once more with a new one. Each exchange is
counted in `tucano_pix_provider_calls_total` and timed in `tucano_pix_provider_call_seconds`;
each failed one is logged at warning, each call that succeeds once at info. Logs carry ids,
statuses and the problem's type and title: never a token, the client's secret, a payer's name
or document, or the PSP's bodies.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import orjson
import structlog

import tucano
from tucano.config import ConfigurationError, Settings
from tucano.core.metrics import record_pix_call
from tucano.pix.api_pix_auth import (
    WEBHOOK_SCOPES,
    AccessToken,
    TokenCache,
    client_ssl_context,
    token_from,
)
from tucano.pix.api_pix_schemas import (
    Charge,
    ChargeStatus,
    PspError,
    PspFailure,
    PspUnavailable,
    Refund,
    charge_from,
    problem_from,
    refund_from,
)

log = structlog.get_logger("tucano.pix")

USER_AGENT = f"Tucano-Pix/{tucano.__version__}"
# No document of the API Pix that Tucano asks for comes near this.
ANSWER_LIMIT = 1024 * 1024
TXID = re.compile(r"[a-zA-Z0-9]{26,35}")
END_TO_END_ID = re.compile(r"[a-zA-Z0-9]{32}")
REFUND_ID = re.compile(r"[a-zA-Z0-9]{1,35}")
_CPF = re.compile(r"[0-9]{11}")
_CNPJ = re.compile(r"[0-9A-Z]{14}")  # alphanumeric CNPJs are issued from July 2026
_CENT = Decimal("0.01")

T = TypeVar("T")
# Reads a successful answer: (its status, its JSON or None when empty) -> the result.
Parse = Callable[[int, Any], T]


def money(amount: Decimal) -> str:
    """An amount as the API Pix writes it: a string with two decimals ("10.00")."""
    if not isinstance(amount, Decimal):
        raise TypeError("money is a Decimal, never a float")
    if not amount.is_finite() or amount <= 0 or amount != amount.quantize(_CENT):
        raise ValueError(f"{amount} is not a positive amount in cents")
    return f"{amount.quantize(_CENT):f}"


def _checked(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.fullmatch(value):
        raise ValueError(f"{what} {value!r} does not match {pattern.pattern}")
    return value


async def _read_at_most(answer: aiohttp.ClientResponse, limit: int) -> bytes:
    """The answer's body, cut after `limit` bytes (a PSP never sends that much)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def _summary(error: BaseException) -> str:
    # aiohttp's connection errors name the host and port, never a path or a body.
    return f"{type(error).__name__}: {error}"[:300]


def _nothing(status: int, document: Any) -> None:
    return None


class ApiPixClient:
    """One PSP's API Pix, for one process: one aiohttp session (made in the running loop at the
    first call; `await close()` ends it), one token shared by every call."""

    def __init__(
        self,
        *,
        api_url: str,
        token_url: str,
        client_id: str,
        client_secret: str,
        cert_file: str | None = None,
        key_file: str | None = None,
        ca_file: str | None = None,
        timeout_seconds: float = 10.0,
        attempts: int = 3,
        backoff_seconds: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self._api_url = api_url.rstrip("/")
        self._token_url = token_url
        self._ssl = client_ssl_context(cert_file=cert_file, key_file=key_file, ca_file=ca_file)
        self._timeout = timeout_seconds
        self._attempts = attempts
        self._backoff = backoff_seconds
        self._session: aiohttp.ClientSession | None = None
        self._tokens = TokenCache(
            client_id=client_id,
            client_secret=client_secret,
            request=self._request_token,
            clock=clock,
        )
        self._webhook_tokens = TokenCache(
            client_id=client_id,
            client_secret=client_secret,
            request=self._request_token,
            clock=clock,
            scope=WEBHOOK_SCOPES,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiPixClient:
        """The client of the PSP that the TUCANO_PIX_* settings name."""
        secret = settings.pix_client_secret
        if not (settings.pix_api_url and settings.pix_token_url and settings.pix_client_id):
            raise ConfigurationError(
                "TUCANO_PIX_API_URL, TUCANO_PIX_TOKEN_URL and TUCANO_PIX_CLIENT_ID are required "
                "to reach the PSP"
            )
        if secret is None:
            raise ConfigurationError("TUCANO_PIX_CLIENT_SECRET is required to reach the PSP")
        return cls(
            api_url=settings.pix_api_url,
            token_url=settings.pix_token_url,
            client_id=settings.pix_client_id,
            client_secret=secret.get_secret_value(),
            cert_file=settings.pix_cert_file or None,
            key_file=settings.pix_key_file or None,
            ca_file=settings.pix_ca_file or None,
            timeout_seconds=settings.pix_timeout_seconds,
        )

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    # The API Pix's calls

    async def put_charge(
        self,
        txid: str,
        *,
        expires_in_seconds: int,
        payer_document: str,
        payer_name: str,
        amount: Decimal,
        key: str,
        description: str | None,
    ) -> Charge:
        """Create the charge `txid` (`PUT /cob/{txid}`), or get it back unchanged when it was
        made with the same fields (a retry); `payer_document` is a CPF (11 digits) or a CNPJ
        (14 characters), without punctuation."""
        _checked(txid, TXID, "txid")
        if type(expires_in_seconds) is not int or expires_in_seconds <= 0:
            raise ValueError("expires_in_seconds must be a positive whole number of seconds")
        if _CPF.fullmatch(payer_document):
            devedor = {"cpf": payer_document, "nome": payer_name}
        elif _CNPJ.fullmatch(payer_document):
            devedor = {"cnpj": payer_document, "nome": payer_name}
        else:
            raise ValueError("payer_document must be a CPF (11 digits) or a CNPJ (14 characters)")
        body: dict[str, Any] = {
            "calendario": {"expiracao": expires_in_seconds},
            "devedor": devedor,
            "valor": {"original": money(amount)},
            "chave": key,
        }
        if description:
            body["solicitacaoPagador"] = description
        return await self._call(
            "put_charge", "PUT", f"/cob/{txid}", {"txid": txid}, charge_from, body
        )

    async def get_charge(self, txid: str) -> Charge:
        """The charge `txid` as the PSP has it now (`GET /cob/{txid}`), its Pix received too."""
        _checked(txid, TXID, "txid")
        return await self._call("get_charge", "GET", f"/cob/{txid}", {"txid": txid}, charge_from)

    async def withdraw_charge(self, txid: str) -> Charge | None:
        """Make the charge `txid` unpayable (`PATCH` its status to
        REMOVIDA_PELO_USUARIO_RECEBEDOR) and return it. When the PSP refuses because the charge
        is no longer ATIVA (paid, or removed already, by this call's earlier attempt too), the
        charge as the PSP has it is returned instead: the caller reads `status` and `paid`, as
        a payer may have paid just before. None when the PSP has no such charge (404)."""
        _checked(txid, TXID, "txid")
        body = {"status": ChargeStatus.REMOVIDA_PELO_USUARIO_RECEBEDOR.value}
        ids = {"txid": txid}
        try:
            return await self._call(
                "withdraw_charge", "PATCH", f"/cob/{txid}", ids, charge_from, body
            )
        except PspError as error:
            if error.status == 404:
                return None
            if error.status != 400:
                raise
            refused = error
        charge = await self.get_charge(txid)
        if charge.status is ChargeStatus.ATIVA:
            raise refused  # refused for another reason than its status
        return charge

    async def put_refund(
        self, end_to_end_id: str, refund_id: str, amount: Decimal, description: str | None
    ) -> Refund:
        """Ask for a refund of `amount` of the Pix `end_to_end_id` (`PUT
        /pix/{e2eid}/devolucao/{id}`, natureza ORIGINAL); `refund_id` (1 to 35 letters and
        digits, Tucano's) makes a retry answer the same refund. Its status is EM_PROCESSAMENTO
        until the PSP settles it: ask `get_refund`, or wait for the webhook."""
        _checked(end_to_end_id, END_TO_END_ID, "end_to_end_id")
        _checked(refund_id, REFUND_ID, "refund_id")
        body: dict[str, Any] = {"valor": money(amount), "natureza": "ORIGINAL"}
        if description:
            body["descricao"] = description
        path = f"/pix/{end_to_end_id}/devolucao/{refund_id}"
        ids = {"endToEndId": end_to_end_id, "refundId": refund_id}
        return await self._call("put_refund", "PUT", path, ids, refund_from, body)

    async def get_refund(self, end_to_end_id: str, refund_id: str) -> Refund:
        """The refund `refund_id` of the Pix `end_to_end_id` as the PSP has it now."""
        _checked(end_to_end_id, END_TO_END_ID, "end_to_end_id")
        _checked(refund_id, REFUND_ID, "refund_id")
        path = f"/pix/{end_to_end_id}/devolucao/{refund_id}"
        ids = {"endToEndId": end_to_end_id, "refundId": refund_id}
        return await self._call("get_refund", "GET", path, ids, refund_from)

    async def put_webhook(self, key: str, url: str) -> None:
        """Register `url` as where the PSP posts the Pix received on `key` (`PUT
        /webhook/{chave}`); the PSP appends `/pix` to its path. The URL is never logged: it
        holds the webhook's secret."""
        path = f"/webhook/{quote(key, safe='')}"
        await self._call("put_webhook", "PUT", path, {}, _nothing, {"webhookUrl": url})

    # One call: its attempts, the token, and the one line logged when it succeeds

    async def _call(
        self,
        operation: str,
        method: str,
        path: str,
        ids: dict[str, str],
        parse: Parse[T],
        body: Any = None,
    ) -> T:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"}
        started = time.monotonic()
        attempt = failures = 0
        renewed = False
        while True:
            attempt += 1
            token: str | None = None
            tokens = self._webhook_tokens if operation == "put_webhook" else self._tokens
            try:
                token = await tokens.get(attempt)
                headers["Authorization"] = f"Bearer {token}"
                url = self._api_url + path
                status, result = await self._exchange(
                    operation, method, url, ids, attempt, data, headers, parse
                )
            except PspFailure as failure:
                refused = isinstance(failure, PspError) and failure.status == 401
                if refused and token is not None and not renewed:
                    # The PSP forgot the token (a restart, a rotation): once, with a new one.
                    renewed = True
                    tokens.drop(token)
                    continue
                failures += 1
                if not failure.retryable or failures >= self._attempts:
                    raise
                await asyncio.sleep(self._delay(failures))
                continue
            log.info(
                "pix_provider_call",
                operation=operation,
                **ids,
                status=status,
                attempts=attempt,
                durationMs=round((time.monotonic() - started) * 1000),
            )
            return result

    def _delay(self, failures: int) -> float:
        # Exponential, with jitter so that the calls of many links that failed together spread.
        return self._backoff * 2.0 ** (failures - 1) * random.uniform(0.5, 1.0)

    async def _request_token(
        self, form: dict[str, str], headers: dict[str, str], asked_at: float, attempt: int
    ) -> AccessToken:
        def parse(status: int, document: Any) -> AccessToken:
            return token_from(document, status=status, asked_at=asked_at)

        _, token = await self._exchange(
            "token", "POST", self._token_url, {}, attempt, form, headers, parse
        )
        return token

    # One HTTP exchange: counted, timed, and logged when it fails

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl),
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def _exchange(
        self,
        operation: str,
        method: str,
        url: str,
        ids: dict[str, str],
        attempt: int,
        data: bytes | dict[str, str] | None,
        headers: dict[str, str],
        parse: Parse[T],
    ) -> tuple[int, T]:
        started = time.monotonic()
        try:
            async with self._session_now().request(
                method, url, data=data, headers=headers, allow_redirects=False
            ) as answer:
                raw = await _read_at_most(answer, ANSWER_LIMIT)
                status, reason = answer.status, answer.reason
        except TimeoutError:
            failure = PspUnavailable(f"no answer within {self._timeout:g} s")
        except aiohttp.ClientSSLError as error:
            failure = PspUnavailable(f"TLS refused ({_summary(error)})", retryable=False)
        except (aiohttp.ClientError, OSError) as error:
            failure = PspUnavailable(f"no connection ({_summary(error)})")
        else:
            try:
                # Not JSON (a proxy's page, a body cut at the limit): the parser refuses it.
                document = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                document = None if not 200 <= status < 300 else raw.decode("utf-8", "replace")
            try:
                if not 200 <= status < 300:
                    raise problem_from(status, document, reason=reason)
                result = parse(status, document)
            except PspError as error:
                outcome = "rejected" if 400 <= status < 500 and status != 429 else "failed"
                self._failed(operation, ids, attempt, started, outcome, error)
                raise
            record_pix_call(operation, "success", time.monotonic() - started)
            return status, result
        self._failed(operation, ids, attempt, started, "unavailable", failure)
        raise failure

    @staticmethod
    def _failed(
        operation: str,
        ids: dict[str, str],
        attempt: int,
        started: float,
        outcome: str,
        failure: PspFailure,
    ) -> None:
        seconds = time.monotonic() - started
        record_pix_call(operation, outcome, seconds)
        if isinstance(failure, PspError):
            details: dict[str, Any] = {
                "status": failure.status,
                "problemType": failure.type,
                "problemTitle": failure.title,
                # The properties at fault, never their values (a payer's data).
                "violations": [v.property for v in failure.violations] or None,
            }
        else:
            details = {"error": str(failure)}
        log.warning(
            "pix_provider_call_failed",
            operation=operation,
            **ids,
            outcome=outcome,
            attempt=attempt,
            durationMs=round(seconds * 1000),
            **details,
        )
