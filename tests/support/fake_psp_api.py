"""The fake PSP's state and its HTTP answers: the API Pix routes it implements (behind
fake_psp_oauth.py's tokens) and the webhook notifications it sends. fake_psp.py serves them over
mutual TLS and adds the test controls.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson
from aiohttp import web

from tests.support.fake_psp_model import (
    ATIVA,
    DEVOLVIDO,
    END_TO_END_ID,
    REFUND_ID,
    REMOVIDA_PELO_USUARIO_RECEBEDOR,
    TXID,
    Charge,
    Problem,
    ReceivedPix,
    Refund,
    check_cob,
    check_refund,
    dynamic_br_code,
    timestamp,
)
from tests.support.fake_psp_oauth import (
    TOKEN_PATH,
    OAuthServer,
    json_response,
)
from tucano.brazil.pix import new_end_to_end_id

API_BASE = "/api/v2"
RefundStatus = Literal["DEVOLVIDO", "NAO_REALIZADO"]


@dataclass
class Webhook:
    url: str
    created_at: datetime


@dataclass
class Notification:
    """One POST the PSP made to a receiving user's webhook."""

    url: str
    body: bytes
    status: int | None  # None when no answer came (refused, timed out)
    error: str | None = None

    def json(self) -> Any:
        return orjson.loads(self.body)


def webhook_target(registered: str, append: Literal["path", "literal"] = "path") -> str:
    """Where a PSP posts Pix for a webhook registered as `registered`: `/pix` at the end of its
    path, the query kept ("path"), or glued to the end of the whole text as some PSPs do
    ("literal", which lands inside a trailing query parameter)."""
    if append == "literal":
        return registered + "/pix"
    parts = urlsplit(registered)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/pix"))


class PspApi:
    """The state of one receiving user at the PSP and the answers to its API calls."""

    def __init__(
        self,
        *,
        oauth: OAuthServer | None = None,
        known_keys: Iterable[str] | None = None,
        merchant_name: str = "LOJA TUCANO TESTE",
        merchant_city: str = "SAO PAULO",
        ispb: str = "12345678",
        brcode_amount: bool = False,
        refund_settle_seconds: float | None = 0.1,
        refund_outcome: RefundStatus = DEVOLVIDO,
        webhook_append: Literal["path", "literal"] = "path",
        webhook_timeout: float = 10.0,
    ) -> None:
        self.oauth = oauth or OAuthServer()
        self.known_keys = frozenset(known_keys) if known_keys is not None else None
        self.merchant_name = merchant_name
        self.merchant_city = merchant_city
        self.ispb = ispb
        self.brcode_amount = brcode_amount
        # None: refunds stay EM_PROCESSAMENTO until a test calls settle_refund.
        self.refund_settle_seconds = refund_settle_seconds
        self.refund_outcome: RefundStatus = refund_outcome
        self.refund_failure_reason = "Devolução recusada pelo PSP do pagador (fake)."
        self.webhook_append: Literal["path", "literal"] = webhook_append
        self.webhook_timeout = webhook_timeout
        self.location_host = "127.0.0.1"
        self.charges: dict[str, Charge] = {}
        self.pix: dict[str, ReceivedPix] = {}
        self.webhooks: dict[str, Webhook] = {}
        self.notifications: list[Notification] = []
        self._next_loc_id = 1000
        self._tasks: set[asyncio.Task[Any]] = set()
        self._session: aiohttp.ClientSession | None = None

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)

    def routes(self) -> list[web.RouteDef]:
        scoped, cob, pix = self.oauth.scoped, API_BASE + "/cob/{txid}", API_BASE + "/pix/{e2eid}"
        refund, webhook = pix + "/devolucao/{id}", API_BASE + "/webhook/{chave}"
        return [
            web.post(TOKEN_PATH, self.oauth.token),
            web.put(cob, scoped("cob.write", self._put_cob)),
            web.patch(cob, scoped("cob.write", self._patch_cob)),
            web.get(cob, scoped("cob.read", self._get_cob)),
            web.get(pix, scoped("pix.read", self._get_pix)),
            web.put(refund, scoped("pix.write", self._put_refund)),
            web.get(refund, scoped("pix.read", self._get_refund)),
            web.put(webhook, scoped("webhook.write", self._put_webhook)),
            web.get(webhook, scoped("webhook.read", self._get_webhook)),
            web.delete(webhook, scoped("webhook.write", self._delete_webhook)),
        ]

    # Charges (cob)

    @staticmethod
    async def _body(request: web.Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            raise Problem(400, "RequisicaoInvalida", "O corpo deve ser um objeto JSON.")
        return body

    def _charge(self, txid: str) -> Charge:
        charge = self.charges.get(txid)
        if charge is None:
            raise Problem(404, "CobNaoEncontrado", "Cobrança não encontrada para o txid.")
        return charge

    def _br_code(self, charge: Charge) -> str:
        return dynamic_br_code(
            charge.location,
            merchant_name=self.merchant_name,
            merchant_city=self.merchant_city,
            amount=charge.original if self.brcode_amount else None,
        )

    def charge_document(self, charge: Charge) -> dict[str, Any]:
        return charge.document([self.pix[e2eid].document() for e2eid in charge.end_to_end_ids])

    async def _put_cob(self, request: web.Request) -> web.StreamResponse:
        txid = request.match_info["txid"]
        if not TXID.fullmatch(txid):
            raise Problem(
                400,
                "CobOperacaoInvalida",
                "O txid não respeita o schema.",
                [{"razao": "O txid tem de 26 a 35 de [a-zA-Z0-9].", "propriedade": "cob.txid"}],
            )
        body = await self._body(request)
        charge = self.charges.get(txid)
        if charge is not None and charge.request == body:
            return json_response(self.charge_document(charge), 201)
        fields = check_cob(body, revision=False, known_keys=self.known_keys)
        if charge is None:
            self._next_loc_id += 1
            charge = Charge(
                txid=txid,
                fields=fields,
                request=body,
                created_at=self.now(),
                loc_id=self._next_loc_id,
                location=f"{self.location_host}/qr/v2/{uuid.uuid4().hex}",
                pix_copia_e_cola="",
            )
            self.charges[txid] = charge
        elif charge.status != ATIVA:
            raise Problem(
                400,
                "CobOperacaoInvalida",
                "A cobrança já existe, não está no status ATIVA, e a requisição busca alterá-la.",
            )
        else:
            charge.fields, charge.request = fields, body
            charge.revisao += 1
        charge.pix_copia_e_cola = self._br_code(charge)
        return json_response(self.charge_document(charge), 201)

    async def _patch_cob(self, request: web.Request) -> web.StreamResponse:
        charge = self._charge(request.match_info["txid"])
        body = await self._body(request)
        fields = check_cob(body, revision=True, known_keys=self.known_keys)
        if charge.status != ATIVA:
            raise Problem(
                400,
                "CobOperacaoInvalida",
                f"A cobrança não está ATIVA ({charge.status}), e a requisição busca alterá-la.",
            )
        if body.get("status") == REMOVIDA_PELO_USUARIO_RECEBEDOR:
            charge.status = REMOVIDA_PELO_USUARIO_RECEBEDOR
            charge.revisao += 1
        elif fields:
            for name, value in fields.items():
                if name in ("calendario", "valor"):
                    charge.fields[name] = {**charge.fields.get(name, {}), **value}
                else:
                    charge.fields[name] = value
            charge.revisao += 1
            charge.pix_copia_e_cola = self._br_code(charge)
        return json_response(self.charge_document(charge))

    async def _get_cob(self, request: web.Request) -> web.StreamResponse:
        return json_response(self.charge_document(self._charge(request.match_info["txid"])))

    # Pix received and refunds (devolucao)

    def _pix(self, e2eid: str) -> ReceivedPix:
        pix = self.pix.get(e2eid) if END_TO_END_ID.fullmatch(e2eid) else None
        if pix is None:
            raise Problem(404, "PixNaoEncontrado", "Pix não encontrado para o e2eid informado.")
        return pix

    async def _get_pix(self, request: web.Request) -> web.StreamResponse:
        return json_response(self._pix(request.match_info["e2eid"]).document())

    def new_end_to_end_id(self, at: datetime, kind: str = "E") -> str:
        return kind + new_end_to_end_id(ispb=self.ispb, at=at)[1:]

    async def _put_refund(self, request: web.Request) -> web.StreamResponse:
        pix = self._pix(request.match_info["e2eid"])
        refund_id = request.match_info["id"]
        if not REFUND_ID.fullmatch(refund_id):
            raise Problem(
                400,
                "PixDevolucaoInvalida",
                "O id da devolução não respeita o schema.",
                [{"razao": "O id tem de 1 a 35 de [a-zA-Z0-9].", "propriedade": "devolucao.id"}],
            )
        body = await self._body(request)
        refund = pix.refunds.get(refund_id)
        if refund is not None:
            if refund.request == body:
                return json_response(refund.document(), 201)
            raise Problem(
                400,
                "PixDevolucaoInvalida",
                "Este id já foi usado por outra devolução deste Pix.",
                [{"razao": "O id já foi utilizado.", "propriedade": "devolucao.id"}],
            )
        now = self.now()
        check_refund(body, pix, now)
        refund = Refund(
            id=refund_id,
            rtr_id=self.new_end_to_end_id(now, "D"),
            valor=Decimal(body["valor"]),
            request=body,
            requested_at=now,
            natureza=body.get("natureza", "ORIGINAL"),
            descricao=body.get("descricao"),
        )
        pix.refunds[refund_id] = refund
        if self.refund_settle_seconds is not None:
            self.spawn(self._settle_later(pix.end_to_end_id, refund_id))
        return json_response(refund.document(), 201)

    async def _settle_later(self, e2eid: str, refund_id: str) -> None:
        await asyncio.sleep(self.refund_settle_seconds or 0)
        await self.settle_refund(e2eid, refund_id, status=self.refund_outcome)

    async def settle_refund(
        self,
        end_to_end_id: str,
        refund_id: str,
        *,
        status: RefundStatus = DEVOLVIDO,
        motivo: str | None = None,
        notify: bool = True,
    ) -> dict[str, Any]:
        """Give a refund its final status and, as the spec asks, tell the key's webhook."""
        pix = self.pix[end_to_end_id]
        refund = pix.refunds[refund_id]
        refund.status = status
        if status == DEVOLVIDO:
            refund.settled_at = self.now()
        else:
            refund.motivo = motivo or self.refund_failure_reason
        if notify:
            await self.notify(pix.chave, [pix.document()])
        return refund.document()

    async def _get_refund(self, request: web.Request) -> web.StreamResponse:
        refund = self._pix(request.match_info["e2eid"]).refunds.get(request.match_info["id"])
        if refund is None:
            raise Problem(404, "PixDevolucaoNaoEncontrada", "Devolução não encontrada.")
        return json_response(refund.document())

    # Webhooks

    def _webhook_problem(self, prop: str, reason: str) -> Problem:
        return Problem(
            400,
            "WebhookOperacaoInvalida",
            "A presente requisição busca criar um webhook sem respeitar o schema ou, ainda, "
            "com sentido semanticamente inválido.",
            [{"razao": reason, "propriedade": prop}],
        )

    async def _put_webhook(self, request: web.Request) -> web.StreamResponse:
        chave = request.match_info["chave"]
        if len(chave) > 77 or (self.known_keys is not None and chave not in self.known_keys):
            raise self._webhook_problem("chave", "A chave não pertence a este usuário recebedor.")
        url = (await self._body(request)).get("webhookUrl")
        if not isinstance(url, str) or not (
            urlsplit(url).scheme in ("http", "https") and urlsplit(url).hostname
        ):
            raise self._webhook_problem("webhook.webhookUrl", "webhookUrl não é uma URL.")
        self.webhooks[chave] = Webhook(url, self.now())
        return web.Response(status=200)

    def _webhook(self, chave: str) -> Webhook:
        webhook = self.webhooks.get(chave)
        if webhook is None:
            raise Problem(404, "WebhookNaoEncontrado", "Não há webhook para esta chave.")
        return webhook

    async def _get_webhook(self, request: web.Request) -> web.StreamResponse:
        chave = request.match_info["chave"]
        webhook = self._webhook(chave)
        return json_response(
            {"webhookUrl": webhook.url, "chave": chave, "criacao": timestamp(webhook.created_at)}
        )

    async def _delete_webhook(self, request: web.Request) -> web.StreamResponse:
        chave = request.match_info["chave"]
        self._webhook(chave)
        del self.webhooks[chave]
        return web.Response(status=204)

    async def notify(self, chave: str, items: list[dict[str, Any]]) -> Notification | None:
        """POST `{"pix": items}` to the webhook of `chave`, if one is registered."""
        webhook = self.webhooks.get(chave)
        if webhook is None:
            return None
        return await self.deliver({"pix": items}, webhook_target(webhook.url, self.webhook_append))

    async def deliver(self, body: Any, url: str) -> Notification:
        """POST `body` (JSON unless it is already bytes or text) to `url` and record it."""
        if isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = orjson.dumps(body)
        if self._session is None:
            raise RuntimeError("the fake PSP is not started")
        notification = Notification(url=url, body=data, status=None)
        try:
            async with self._session.post(
                url,
                data=data,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=self.webhook_timeout),
            ) as answer:
                await answer.read()
                notification.status = answer.status
        except (aiohttp.ClientError, TimeoutError) as error:
            notification.error = repr(error)
        self.notifications.append(notification)
        return notification

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
