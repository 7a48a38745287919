"""The fake PSP that the `api-pix` tests talk to behaves as the API Pix spec says: mutual TLS,
OAuth2, charges, payments told to the webhook, refunds, RFC 7807 errors, and its failure modes."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web

from tests.support.fake_psp import ChargeNotPayable, FakePsp, fake_psp
from tests.support.fake_psp_api import webhook_target
from tests.support.fake_psp_model import dynamic_br_code
from tests.support.fake_psp_thread import fake_psp_in_thread
from tucano.brazil.brcode import has_valid_crc, parse_tlv

TXID = "Tucano0000000000000000000000001"
PROBLEM = "https://pix.bcb.gov.br/api/v2/error/"
CHAVE = "merchant@example.com"
COB: dict[str, Any] = {
    "calendario": {"expiracao": 3600},
    "devedor": {"cpf": "52998224725", "nome": "Maria da Silva"},
    "valor": {"original": "10.00"},
    "chave": CHAVE,
    "solicitacaoPagador": "Pedido 42",
}


@pytest.fixture
async def psp(tmp_path: Path) -> AsyncIterator[FakePsp]:
    async with fake_psp(tmp_path) as started:
        yield started


@pytest.fixture
async def http(psp: FakePsp) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=psp.client_ssl_context())
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def token_of(http: aiohttp.ClientSession, psp: FakePsp, **form: str) -> str:
    async with http.post(
        psp.token_url,
        data={"grant_type": "client_credentials", **form},
        headers={"Authorization": basic(psp.oauth.client_id, psp.oauth.client_secret)},
    ) as answer:
        assert answer.status == 200, await answer.text()
        token: str = (await answer.json())["access_token"]
    return token


async def call(
    http: aiohttp.ClientSession,
    psp: FakePsp,
    method: str,
    route: str,
    body: Any = None,
    *,
    token: str | None = None,
) -> tuple[int, str, Any]:
    """(status, content type, JSON body or None) of an API call with a fresh token."""
    token = token or await token_of(http, psp)
    async with http.request(
        method, psp.api_url + route, json=body, headers={"Authorization": f"Bearer {token}"}
    ) as answer:
        text = await answer.text()
        return (
            answer.status,
            answer.content_type,
            (await answer.json(content_type=None) if text else None),
        )


class Webhooks:
    """A merchant's webhook endpoint over plain HTTP on loopback, recording path and query."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((request.path_qs, await request.json()))
        return web.Response(text="ok")

    async def __aenter__(self) -> Webhooks:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_the_handshake_needs_a_client_certificate_from_the_psps_ca(psp: FakePsp) -> None:
    for context in (
        psp.client_ssl_context(certificate=False),
        psp.certificates.client_context(stranger=True),
    ):
        connector = aiohttp.TCPConnector(ssl=context)
        async with aiohttp.ClientSession(connector=connector) as session:
            with pytest.raises(aiohttp.ClientError):
                async with session.post(psp.token_url) as answer:
                    await answer.read()
    assert psp.calls == []


async def test_tokens_by_basic_or_form_and_api_calls_need_a_live_one(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    async with http.post(
        psp.token_url,
        data={
            "grant_type": "client_credentials",
            "client_id": psp.oauth.client_id,
            "client_secret": psp.oauth.client_secret,
            "scope": "cob.read cob.write",
        },
    ) as answer:
        granted = await answer.json()
    assert granted["token_type"] == "Bearer"
    assert granted["expires_in"] == 3600
    assert granted["scope"] == "cob.read cob.write"
    async with http.post(
        psp.token_url,
        data={"grant_type": "client_credentials"},
        headers={"Authorization": basic(psp.oauth.client_id, "wrong")},
    ) as answer:
        assert (answer.status, await answer.json()) == (401, {"error": "invalid_client"})
    assert psp.oauth.tokens_issued == 1
    assert psp.calls[0].client_certificate == "tucano-pix-client"

    status, kind, body = await call(http, psp, "GET", f"/cob/{TXID}", token="made-up")
    assert (status, kind, body["status"]) == (401, "application/problem+json", 401)
    status, _, body = await call(
        http, psp, "GET", "/pix/" + "E" * 32, token=granted["access_token"]
    )
    assert (status, body["type"]) == (403, PROBLEM + "AcessoNegado")
    psp.oauth.token_ttl_seconds = 0
    expired = await token_of(http, psp)
    assert (await call(http, psp, "GET", f"/cob/{TXID}", token=expired))[0] == 401


async def test_a_charge_is_created_once_read_revised_and_removed(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    status, _, created = await call(http, psp, "PUT", f"/cob/{TXID}", COB)
    assert status == 201
    assert created["status"] == "ATIVA"
    assert created["revisao"] == 0
    assert created["txid"] == TXID
    assert created["valor"] == {"original": "10.00"}
    assert created["calendario"]["expiracao"] == 3600
    assert created["location"] == created["loc"]["location"]
    code = created["pixCopiaECola"]
    assert has_valid_crc(code)
    fields = dict(parse_tlv(code))
    assert fields["01"] == "12"
    assert parse_tlv(fields["26"]) == [("00", "br.gov.bcb.pix"), ("25", created["location"])]
    assert "54" not in fields
    assert fields["62"] == "0503***"

    replayed = await call(http, psp, "PUT", f"/cob/{TXID}", COB)
    assert replayed[0] == 201
    assert replayed[2] == created
    revised = await call(http, psp, "PUT", f"/cob/{TXID}", {**COB, "valor": {"original": "12.50"}})
    assert (revised[2]["revisao"], revised[2]["valor"]) == (1, {"original": "12.50"})
    assert (await call(http, psp, "GET", f"/cob/{TXID}"))[2] == revised[2]

    removal = {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}
    status, _, removed = await call(http, psp, "PATCH", f"/cob/{TXID}", removal)
    assert (status, removed["status"], removed["revisao"]) == (200, removal["status"], 2)
    status, kind, again = await call(http, psp, "PATCH", f"/cob/{TXID}", removal)
    assert (status, kind, again["type"]) == (
        400,
        "application/problem+json",
        PROBLEM + "CobOperacaoInvalida",
    )
    status, _, missing = await call(http, psp, "GET", "/cob/" + "x" * 30)
    assert (status, missing["type"]) == (404, PROBLEM + "CobNaoEncontrado")


async def test_a_charge_that_breaks_the_schema_is_refused_with_each_violation(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    bad = {
        **COB,
        "calendario": {"expiracao": 0},
        "devedor": {"cpf": "52998224724", "nome": "Maria"},
        "valor": {"original": 10.0},
        "solicitacaoPagador": "x" * 141,
    }
    status, kind, problem = await call(http, psp, "PUT", f"/cob/{TXID}", bad)
    assert (status, kind) == (400, "application/problem+json")
    assert problem["type"] == PROBLEM + "CobOperacaoInvalida"
    assert {v["propriedade"] for v in problem["violacoes"]} == {
        "cob.calendario.expiracao",
        "cob.devedor.cpf",
        "cob.valor.original",
        "cob.solicitacaoPagador",
    }
    status, _, problem = await call(http, psp, "PUT", "/cob/tooshort", COB)
    assert (status, problem["violacoes"][0]["propriedade"]) == (400, "cob.txid")
    status, _, problem = await call(http, psp, "GET", f"/cobv/{TXID}")
    assert (status, problem["type"]) == (404, PROBLEM + "NaoEncontrado")
    assert psp.charges == {}


async def test_a_payment_is_told_to_the_webhook_with_pix_after_the_path(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    async with Webhooks() as webhooks:
        registered = webhooks.url + "/pix-provider/v1/webhook?hmac=s3cret"
        chave = CHAVE
        assert (await call(http, psp, "PUT", f"/webhook/{chave}", {"webhookUrl": registered}))[
            0
        ] == 200
        assert (await call(http, psp, "GET", f"/webhook/{chave}"))[2]["webhookUrl"] == registered
        await call(http, psp, "PUT", f"/cob/{TXID}", COB)

        item = await psp.pay(TXID)

        assert webhooks.received == [("/pix-provider/v1/webhook/pix?hmac=s3cret", {"pix": [item]})]
        assert item["txid"] == TXID
        assert item["valor"] == "10.00"
        assert len(item["endToEndId"]) == 32
        assert item["endToEndId"].startswith("E12345678")
        paid = (await call(http, psp, "GET", f"/cob/{TXID}"))[2]
        assert (paid["status"], paid["pix"]) == ("CONCLUIDA", [item])
        assert (await call(http, psp, "GET", "/pix/" + item["endToEndId"]))[2] == item
        with pytest.raises(ChargeNotPayable):
            await psp.pay(TXID)
        removal = {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}
        refused = await call(http, psp, "PATCH", f"/cob/{TXID}", removal)
        assert (refused[0], refused[2]["type"]) == (400, PROBLEM + "CobOperacaoInvalida")

        assert (await call(http, psp, "DELETE", f"/webhook/{chave}"))[0] == 204
        assert (await call(http, psp, "GET", f"/webhook/{chave}"))[0] == 404
        await psp.pay(TXID, "1.00", force=True)
        assert len(webhooks.received) == 1


async def test_an_expired_charge_is_paid_only_when_forced_and_any_body_can_be_posted(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    async with Webhooks() as webhooks:
        psp.register_webhook(CHAVE, webhooks.url + "/hook")
        await call(http, psp, "PUT", f"/cob/{TXID}", COB)
        psp.expire(TXID)
        with pytest.raises(ChargeNotPayable, match="expired"):
            await psp.pay(TXID)
        item = await psp.pay(TXID, force=True, notify=False)
        assert webhooks.received == []
        notification = await psp.post_webhook({"pix": [{**item, "txid": "unknown"}]})
        assert notification.status == 200
        assert webhooks.received == [("/hook/pix", notification.json())]


def test_a_dynamic_code_may_carry_the_amount() -> None:
    code = dynamic_br_code(
        "psp.example/qr/v2/abc", merchant_name="LOJA", merchant_city="RECIFE", amount=Decimal("10")
    )
    assert has_valid_crc(code)
    assert dict(parse_tlv(code))["54"] == "10.00"


def test_the_webhook_url_gets_pix_at_the_end_of_its_path_or_glued_on() -> None:
    assert webhook_target("https://t.example/w?hmac=a") == "https://t.example/w/pix?hmac=a"
    assert webhook_target("https://t.example/w/") == "https://t.example/w/pix"
    assert (
        webhook_target("https://t.example/w?hmac=a", "literal") == "https://t.example/w?hmac=a/pix"
    )


async def wait_for_refund(
    http: aiohttp.ClientSession, psp: FakePsp, route: str, status: str
) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        refund = (await call(http, psp, "GET", route))[2]
        if refund["status"] == status:
            return dict(refund)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{route} never became {status}")


async def test_refunds_are_idempotent_by_id_bounded_and_settle(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    async with Webhooks() as webhooks:
        psp.register_webhook(CHAVE, webhooks.url + "/hook")
        await call(http, psp, "PUT", f"/cob/{TXID}", COB)
        e2eid = (await psp.pay(TXID))["endToEndId"]
        route = f"/pix/{e2eid}/devolucao/refund1"

        status, _, refund = await call(http, psp, "PUT", route, {"valor": "4.00"})
        assert (status, refund["status"], refund["valor"]) == (201, "EM_PROCESSAMENTO", "4.00")
        assert refund["rtrId"].startswith("D") and len(refund["rtrId"]) == 32
        assert (await call(http, psp, "PUT", route, {"valor": "4.00"}))[2] == refund
        reused = await call(http, psp, "PUT", route, {"valor": "5.00"})
        assert (reused[0], reused[2]["type"]) == (400, PROBLEM + "PixDevolucaoInvalida")
        too_much = await call(
            http, psp, "PUT", f"/pix/{e2eid}/devolucao/refund2", {"valor": "6.01"}
        )
        assert too_much[2]["violacoes"][0]["propriedade"] == "devolucao.valor"
        dashed = await call(http, psp, "PUT", f"/pix/{e2eid}/devolucao/a-b", {"valor": "1.00"})
        assert dashed[0] == 400

        settled = await wait_for_refund(http, psp, route, "DEVOLVIDO")
        assert "liquidacao" in settled["horario"]
        told = webhooks.received[-1][1]["pix"][0]
        assert told["devolucoes"] == [settled]

        psp.refund_outcome = "NAO_REALIZADO"
        second = f"/pix/{e2eid}/devolucao/refund2"
        assert (await call(http, psp, "PUT", second, {"valor": "6.00"}))[0] == 201
        refused = await wait_for_refund(http, psp, second, "NAO_REALIZADO")
        assert refused["motivo"]
        # A refund that was not made gives its amount back to what can be refunded.
        assert (await call(http, psp, "PUT", f"/pix/{e2eid}/devolucao/r3", {"valor": "6.00"}))[
            0
        ] == 201
        missing = await call(http, psp, "GET", f"/pix/{e2eid}/devolucao/nope")
        assert (missing[0], missing[2]["type"]) == (404, PROBLEM + "PixDevolucaoNaoEncontrada")


async def test_fail_with_answers_a_problem_for_the_calls_it_names(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    token = await token_of(http, psp)
    psp.fail_with(503, times=1, route="/cob")
    status, kind, body = await call(http, psp, "PUT", f"/cob/{TXID}", COB, token=token)
    assert (status, kind, body["type"]) == (
        503,
        "application/problem+json",
        PROBLEM + "ServicoIndisponivel",
    )
    assert psp.charges == {}
    assert (await call(http, psp, "PUT", f"/cob/{TXID}", COB, token=token))[0] == 201

    psp.fail_with(500)
    async with http.post(psp.token_url) as answer:
        assert answer.status == 500
    psp.clear_failures()
    psp.fail_with(502, body="<html>Bad gateway</html>")
    async with http.get(psp.api_url + f"/cob/{TXID}") as answer:
        assert (answer.status, answer.content_type) == (502, "text/html")
    assert [c.status for c in psp.calls_to("PUT", "/cob")] == [503, 201]


async def until(condition: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        await asyncio.sleep(0.01)


async def test_hang_delays_answers_before_or_after_the_change(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    token = await token_of(http, psp)
    headers = {"Authorization": f"Bearer {token}"}
    impatient = aiohttp.ClientTimeout(total=0.5)
    psp.hang(2, times=1, route="/cob")
    with pytest.raises(TimeoutError):
        await http.put(psp.api_url + f"/cob/{TXID}", json=COB, headers=headers, timeout=impatient)
    await until(lambda: len(psp.calls_to("PUT", "/cob")) == 1)
    assert psp.charges == {}
    psp.hang(2, times=1, route="/cob", after_processing=True)
    with pytest.raises(TimeoutError):
        await http.put(psp.api_url + f"/cob/{TXID}", json=COB, headers=headers, timeout=impatient)
    await until(lambda: TXID in psp.charges)
    assert [c.status for c in psp.calls_to("PUT", "/cob")] == [None, None]


async def test_down_refuses_connections_and_up_serves_the_same_state_on_the_same_port(
    psp: FakePsp, http: aiohttp.ClientSession
) -> None:
    await call(http, psp, "PUT", f"/cob/{TXID}", COB)
    port = psp.port
    await psp.down()
    with pytest.raises(aiohttp.ClientConnectionError):
        await call(http, psp, "GET", f"/cob/{TXID}")
    await psp.up()
    assert psp.port == port
    assert (await call(http, psp, "GET", f"/cob/{TXID}"))[2]["status"] == "ATIVA"


def test_the_threaded_fake_serves_a_synchronous_client(tmp_path: Path) -> None:
    with fake_psp_in_thread(tmp_path) as running:
        psp = running.psp
        assert set(psp.tucano_env()) >= {"TUCANO_PIX_CERT_FILE", "TUCANO_PIX_CA_FILE"}
        with httpx.Client(verify=psp.client_ssl_context()) as client:
            token = client.post(
                psp.token_url,
                data={"grant_type": "client_credentials"},
                auth=(psp.oauth.client_id, psp.oauth.client_secret),
            ).json()["access_token"]
            created = client.put(
                f"{psp.api_url}/cob/{TXID}", json=COB, headers={"Authorization": f"Bearer {token}"}
            )
            assert created.status_code == 201
            assert running.wait_for_calls("PUT", "/cob")[0].body == COB
            item = running.pay(TXID)
            paid = client.get(
                f"{psp.api_url}/cob/{TXID}", headers={"Authorization": f"Bearer {token}"}
            ).json()
        assert paid["pix"] == [item]
