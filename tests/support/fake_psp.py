"""A fake PSP (the merchant's bank) speaking the Banco Central's API Pix v2.9.0, for the tests of
Tucano's `api-pix` provider.

It serves HTTPS on 127.0.0.1 with a throwaway CA and requires a client certificate from it
(fake_psp_tls.py), as real PSPs require mutual TLS. What it implements, from the spec:

- OAuth2 client credentials at `POST /oauth/token` (client id and secret by HTTP Basic or in
  the form; `scope` optional, at most the scopes it grants; `expires_in` is
  `token_ttl_seconds`). Every API call needs `Authorization: Bearer` with an unexpired token
  (401 otherwise) holding the operation's scope (403 AcessoNegado otherwise).
- Under `/api/v2`: `PUT|PATCH|GET /cob/{txid}` (immediate charges: the CobSolicitada and
  CobRevisada schemas are checked, each violation listed in `violacoes`; a PUT replayed with the
  same body answers the same charge; a PUT with another body revises an ATIVA charge and is
  refused for any other status; a PATCH of a charge that is not ATIVA is refused; the answer
  carries `location` and `pixCopiaECola`, a dynamic BR Code whose field 26 holds the location),
  `GET /pix/{e2eid}`, `PUT|GET /pix/{e2eid}/devolucao/{id}` (refunds: natureza ORIGINAL, at
  most what is left of the Pix, within 90 days, a replay by id answers the same refund; status
  EM_PROCESSAMENTO, then `refund_outcome` after `refund_settle_seconds`, announced to the
  webhook as the spec's callback says), `PUT|GET|DELETE /webhook/{chave}`.
- Errors are RFC 7807 (`application/problem+json`) with the spec's `type` URIs
  (`https://pix.bcb.gov.br/api/v2/error/CobOperacaoInvalida`, ...); 401 is `about:blank`, as
  the spec leaves it to the PSP.
- Webhook notifications: `{"pix": [...]}` POSTed to the registered URL with `/pix` at the end
  of its path and its query kept (`webhook_append="literal"` glues `/pix` to the end of the
  whole URL instead, as some PSPs do).

Left out: `POST /cob` (txid chosen by the PSP), lists (`GET /cob`, `/pix`, `/webhook`),
charges with a due date (`cobv`, `lotecobv`), locations (`/loc`; a `loc` in a body is refused)
and the payload a location serves (the BR Code's URL leads nowhere), recurrences (`rec`,
`solicrec`, `cobr`), Pix Saque and Troco, `revisao` history (`GET ?revisao=` answers the current
revision), mTLS on the webhook POST (the fake presents no certificate), notification retries,
and `REMOVIDA_PELO_PSP` (a charge past its expiry stays ATIVA, as the spec's status does not
follow expiry; `pay` refuses it unless forced).

Options (keywords of `FakePsp`, attributes afterwards): `oauth=OAuthServer(client_id=...,
client_secret=..., scopes=..., token_ttl_seconds=...)`, `known_keys` (the keys this user owns;
any when None), `merchant_name`, `merchant_city`, `ispb`, `brcode_amount` (write field 54),
`refund_settle_seconds` (None: refunds wait for `settle_refund`), `refund_outcome`,
`webhook_append`, `webhook_timeout`.

Tests drive it with plain methods: `pay`, `settle_refund`, `post_webhook`, `register_webhook`,
`expire`, `fail_with`, `hang`, `clear_failures`, `oauth.revoke`, `down`, `up`; they read
`charges`, `pix`, `webhooks`, `calls` (`calls_to`, `wait_for_calls`), `notifications` and
`oauth.tokens_issued`. Use `async with fake_psp(tmp_path) as psp:` in async tests (the fake
shares their event loop) and fake_psp_thread.py's `fake_psp_in_thread(tmp_path)` in synchronous
tests that run Tucano as a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from tests.support.fake_psp_api import (
    API_BASE,
    Notification,
    PspApi,
    Webhook,
    webhook_target,
)
from tests.support.fake_psp_model import ATIVA, CONCLUIDA, ERROR_OF_STATUS, Problem, ReceivedPix
from tests.support.fake_psp_oauth import (  # OAuthServer: for FakePsp(oauth=...)
    TOKEN_PATH,
    OAuthServer,
    json_response,
    problem_response,
)
from tests.support.fake_psp_tls import make_certificates

__all__ = ["ChargeNotPayable", "FakePsp", "OAuthServer", "PspCall", "fake_psp"]


class ChargeNotPayable(Exception):
    """A payer's bank would refuse this charge (expired, removed, paid): `pay(force=True)`."""


@dataclass
class PspCall:
    """One request the fake received, for assertions."""

    method: str
    path: str  # the request's path, e.g. /api/v2/cob/abc
    route: str  # the path under /api/v2 for API calls (/cob/abc); the path otherwise
    query: dict[str, str]
    headers: dict[str, str]  # every header, names in lower case
    body: Any  # the JSON sent; its text when it is not JSON; None when empty
    client_certificate: str | None  # the common name of the certificate the client presented
    status: int | None = None  # the answer's status, once answered


@dataclass
class FailureRule:
    """A failure mode: `status` answers instead of the API; `seconds` delay the answer."""

    status: int | None = None
    body: Any = None
    seconds: float = 0.0
    after_processing: bool = False
    remaining: int | None = None
    method: str | None = None
    route: str | None = None
    hits: list[PspCall] = field(default_factory=list)

    def matches(self, call: PspCall) -> bool:
        return (self.method is None or self.method == call.method) and (
            self.route is None or call.route.startswith(self.route)
        )


def _parsed(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


def _peer_name(request: web.Request) -> str | None:
    transport = request.transport
    certificate = transport.get_extra_info("peercert") if transport is not None else None
    for entry in (certificate or {}).get("subject", ()):
        for key, value in entry:
            if key == "commonName":
                return str(value)
    return None


class FakePsp(PspApi):
    """The PSP of one receiving user; `PspApi` lists the options. Start with `start()`."""

    def __init__(self, directory: Path, **options: Any) -> None:
        super().__init__(**options)
        self.certificates = make_certificates(directory)
        self.ca_file = self.certificates.ca_file
        self.client_cert_file = self.certificates.client_cert_file
        self.client_key_file = self.certificates.client_key_file
        self.calls: list[PspCall] = []
        self.port = 0
        self._rules: list[FailureRule] = []
        self._runner: web.AppRunner | None = None
        self._server_ssl = self.certificates.server_context()

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return self.base_url + API_BASE

    @property
    def token_url(self) -> str:
        return self.base_url + TOKEN_PATH

    def client_ssl_context(self, *, certificate: bool = True) -> ssl.SSLContext:
        """What a client needs to reach the fake: its CA trusted, Tucano's certificate shown."""
        return self.certificates.client_context(certificate=certificate)

    def tucano_env(self) -> dict[str, str]:
        """The TUCANO_PIX_* settings that point Tucano at this PSP (the webhook secret is
        Tucano's own, so it is not among them)."""
        return {
            "TUCANO_PIX_PROVIDER": "api-pix",
            "TUCANO_PIX_API_URL": self.api_url,
            "TUCANO_PIX_TOKEN_URL": self.token_url,
            "TUCANO_PIX_CLIENT_ID": self.oauth.client_id,
            "TUCANO_PIX_CLIENT_SECRET": self.oauth.client_secret,
            "TUCANO_PIX_CERT_FILE": str(self.client_cert_file),
            "TUCANO_PIX_KEY_FILE": str(self.client_key_file),
            "TUCANO_PIX_CA_FILE": str(self.ca_file),
        }

    # Life cycle

    async def start(self) -> FakePsp:
        self._session = aiohttp.ClientSession()
        await self._listen(0)
        self.location_host = f"127.0.0.1:{self.port}"
        return self

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.down()
        if self._session is not None:
            await self._session.close()

    async def _listen(self, port: int) -> None:
        app = web.Application(middlewares=[self._middleware])
        app.add_routes(self.routes())
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=self._server_ssl)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def down(self) -> None:
        """Stop listening and close every open connection, as a PSP that went away."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def up(self) -> None:
        """Listen again on the same port, with the state kept."""
        if self._runner is None:
            await self._listen(self.port)

    # Every request: logged, maybe delayed or failed, then answered by the API.

    def _route(self, path: str) -> str:
        return path[len(API_BASE) :] if path.startswith(API_BASE + "/") else path

    def _rule_for(self, call: PspCall, *, failing: bool) -> FailureRule | None:
        for rule in self._rules:
            if (rule.status is not None) == failing and rule.matches(call):
                rule.hits.append(call)
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._rules.remove(rule)
                return rule
        return None

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        call = PspCall(
            method=request.method,
            path=request.path,
            route=self._route(request.path),
            query=dict(request.query),
            headers={name.lower(): value for name, value in request.headers.items()},
            body=_parsed(await request.read()),
            client_certificate=_peer_name(request),
        )
        self.calls.append(call)
        hang = self._rule_for(call, failing=False)
        failure = self._rule_for(call, failing=True)
        if hang is not None and not hang.after_processing:
            await asyncio.sleep(hang.seconds)
        if failure is not None:
            response = self._failure(failure)
        else:
            response = await self._answer(request, handler)
        if hang is not None and hang.after_processing:
            await asyncio.sleep(hang.seconds)
        call.status = response.status
        return response

    @staticmethod
    async def _answer(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except Problem as problem:
            return problem_response(problem)
        except web.HTTPException as error:
            kind = "NaoEncontrado" if error.status == 404 else "RequisicaoInvalida"
            return problem_response(Problem(error.status, kind, error.reason))
        return response

    @staticmethod
    def _failure(rule: FailureRule) -> web.StreamResponse:
        status = rule.status or 500
        if rule.body is None:
            kind = ERROR_OF_STATUS.get(status, "ErroInternoDoServidor")
            return problem_response(Problem(status, kind, "Falha simulada pelo PSP fake."))
        if isinstance(rule.body, str | bytes):
            return web.Response(body=rule.body, status=status, content_type="text/html")
        return json_response(rule.body, status)

    # Failure modes

    def fail_with(
        self,
        status: int = 500,
        *,
        times: int | None = None,
        method: str | None = None,
        route: str | None = None,
        body: Any = None,
    ) -> FailureRule:
        """Answer `status` to the next `times` matching requests (all, until cleared, when
        None), with the spec's problem body for that status, or `body` (JSON; text is sent as
        text/html). `route` is a prefix of the path under /api/v2 (`/cob`), or of the path for
        the token endpoint (`/oauth/token`); None matches every request, token calls too."""
        rule = FailureRule(status=status, body=body, remaining=times, method=method, route=route)
        self._rules.append(rule)
        return rule

    def hang(
        self,
        seconds: float,
        *,
        times: int | None = None,
        method: str | None = None,
        route: str | None = None,
        after_processing: bool = False,
    ) -> FailureRule:
        """Delay the answer to matching requests (`times`, `method`, `route` as in fail_with)
        by `seconds`: before doing anything (a client that gives up changes nothing), or
        `after_processing` (the change is made, the answer is late, as when one is lost)."""
        rule = FailureRule(
            seconds=seconds,
            after_processing=after_processing,
            remaining=times,
            method=method,
            route=route,
        )
        self._rules.append(rule)
        return rule

    def clear_failures(self) -> None:
        self._rules.clear()

    # What a payer and the PSP's back office do

    async def pay(
        self,
        txid: str,
        amount: Decimal | str | None = None,
        *,
        notify: bool = True,
        force: bool = False,
        info_pagador: str | None = None,
        paid_at: datetime | None = None,
    ) -> dict[str, Any]:
        """A payer pays the charge `txid` (its amount unless `amount` is given): the charge
        becomes CONCLUIDA, the Pix is kept, and, with `notify`, the key's webhook is told.
        An expired, removed or paid charge raises ChargeNotPayable unless `force`. The Pix
        item (as the webhook and GET /pix carry it) is returned."""
        if isinstance(amount, float):
            raise TypeError("money is a Decimal or a string, never a float")
        charge = self.charges[txid]
        paid_at = paid_at or self.now()
        reason = charge.unpayable_because(paid_at)
        if reason is not None and not force:
            raise ChargeNotPayable(f"charge {txid} cannot be paid: {reason}")
        pix = ReceivedPix(
            end_to_end_id=self.new_end_to_end_id(paid_at),
            txid=txid,
            valor=Decimal(amount) if amount is not None else charge.original,
            chave=charge.chave,
            paid_at=paid_at,
            info_pagador=info_pagador,
        )
        self.pix[pix.end_to_end_id] = pix
        charge.end_to_end_ids.append(pix.end_to_end_id)
        if charge.status == ATIVA:
            charge.status = CONCLUIDA
        item = pix.document()
        if notify:
            await self.notify(charge.chave, [item])
        return item

    async def post_webhook(
        self, body: Any, *, url: str | None = None, chave: str | None = None
    ) -> Notification:
        """POST any `body` to `url`, or to where the webhook of `chave` (by default the only
        webhook registered) receives Pix."""
        if url is None:
            webhook = self.webhooks[chave] if chave is not None else self._only_webhook()
            url = self.webhook_url_for(webhook)
        return await self.deliver(body, url)

    def _only_webhook(self) -> Webhook:
        if len(self.webhooks) != 1:
            raise LookupError(f"{len(self.webhooks)} webhooks are registered: name the key")
        return next(iter(self.webhooks.values()))

    def webhook_url_for(self, webhook: Webhook) -> str:
        return webhook_target(webhook.url, self.webhook_append)

    def register_webhook(self, chave: str, url: str) -> None:
        """As `PUT /webhook/{chave}` would, without a call."""
        self.webhooks[chave] = Webhook(url, self.now())

    def expire(self, txid: str) -> None:
        """Move the charge's creation back so that its expiry has passed."""
        charge = self.charges[txid]
        charge.created_at = self.now() - timedelta(seconds=charge.expiracao + 1)

    # Reading what happened

    def calls_to(self, method: str | None = None, route: str | None = None) -> list[PspCall]:
        """The calls with `method` whose route starts with `route` (see `fail_with`)."""
        return [
            call
            for call in self.calls
            if (method is None or call.method == method)
            and (route is None or call.route.startswith(route))
        ]

    async def wait_for_calls(
        self, method: str | None, route: str | None, count: int = 1, timeout: float = 15
    ) -> list[PspCall]:
        """The matching calls once there are `count` of them, answered; AssertionError after
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answered = [c for c in self.calls_to(method, route) if c.status is not None]
            if len(answered) >= count:
                return answered
            await asyncio.sleep(0.02)
        raise AssertionError(
            f"{len(self.calls_to(method, route))} of {count} {method} {route} calls "
            f"after {timeout}s"
        )


@contextlib.asynccontextmanager
async def fake_psp(directory: Path, **options: Any) -> AsyncIterator[FakePsp]:
    """A started fake PSP in the running event loop, its files under `directory`."""
    psp = await FakePsp(directory, **options).start()
    try:
        yield psp
    finally:
        await psp.stop()
