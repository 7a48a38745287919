"""The API Pix client against the fake PSP, over real mutual TLS: what it sends, how it holds
its token, what it retries, what it raises, and what it logs and counts; and the TUCANO_PIX_*
settings it is built from."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from tests.support.fake_psp import FakePsp, fake_psp
from tests.support.settings import TEST_SECRET_KEY
from tucano.config import ConfigurationError, Settings, load_settings
from tucano.pix.api_pix_client import ApiPixClient
from tucano.pix.api_pix_schemas import (
    ChargeStatus,
    PspError,
    PspUnavailable,
    RefundStatus,
)

TXID = "tucanoLink0000000000000000000001"
CPF = "52998224725"
CNPJ = "11222333000181"
PAYER = "Maria Pagadora da Silva"
KEY = "loja+pix@example.com"
WEBHOOK_SECRET = "webhook-secret-0123456789abcdef"
ERROR = "https://pix.bcb.gov.br/api/v2/error/"


@pytest.fixture
async def psp(tmp_path: Path) -> AsyncIterator[FakePsp]:
    async with fake_psp(tmp_path) as running:
        yield running


@asynccontextmanager
async def client_of(psp: FakePsp, **overrides: Any) -> AsyncIterator[ApiPixClient]:
    values: dict[str, Any] = {
        "api_url": psp.api_url,
        "token_url": psp.token_url,
        "client_id": psp.oauth.client_id,
        "client_secret": psp.oauth.client_secret,
        "cert_file": str(psp.client_cert_file),
        "key_file": str(psp.client_key_file),
        "ca_file": str(psp.ca_file),
        "timeout_seconds": 2.0,
        "backoff_seconds": 0.01,
    }
    values.update(overrides)
    client = ApiPixClient(**values)
    try:
        yield client
    finally:
        await client.close()


async def create_charge(client: ApiPixClient, txid: str = TXID, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "expires_in_seconds": 3600,
        "payer_document": CPF,
        "payer_name": PAYER,
        "amount": Decimal("10.00"),
        "key": KEY,
        "description": "Pedido 42",
    }
    values.update(fields)
    return await client.put_charge(txid, **values)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# Charges


async def test_a_charge_is_created_with_the_links_fields_and_its_code_returned(
    psp: FakePsp,
) -> None:
    async with client_of(psp) as client:
        charge = await create_charge(client)
    [call] = psp.calls_to("PUT", "/cob/")
    assert call.route == f"/cob/{TXID}"
    assert call.client_certificate == "tucano-pix-client"
    assert call.body == {
        "calendario": {"expiracao": 3600},
        "devedor": {"cpf": CPF, "nome": PAYER},
        "valor": {"original": "10.00"},
        "chave": KEY,
        "solicitacaoPagador": "Pedido 42",
    }
    assert charge.txid == TXID
    assert charge.status is ChargeStatus.ATIVA
    assert charge.pix_copia_e_cola == psp.charges[TXID].pix_copia_e_cola
    assert charge.pix_copia_e_cola and charge.pix_copia_e_cola.startswith("000201")
    assert charge.location == psp.charges[TXID].location
    assert charge.amount == Decimal("10.00")
    assert charge.expires_in_seconds == 3600
    assert charge.revision == 0
    assert charge.paid == ()


async def test_a_company_pays_as_cnpj_and_a_charge_without_description_sends_none(
    psp: FakePsp,
) -> None:
    async with client_of(psp) as client:
        await create_charge(client, payer_document=CNPJ, description=None, amount=Decimal("7"))
    body = psp.calls_to("PUT", "/cob/")[0].body
    assert body["devedor"] == {"cnpj": CNPJ, "nome": PAYER}
    assert body["valor"] == {"original": "7.00"}
    assert "solicitacaoPagador" not in body


async def test_money_is_a_decimal_in_cents_and_ids_are_checked_before_any_call(
    psp: FakePsp,
) -> None:
    async with client_of(psp) as client:
        with pytest.raises(TypeError):
            await create_charge(client, amount=10.0)
        with pytest.raises(ValueError, match="cents"):
            await create_charge(client, amount=Decimal("10.005"))
        with pytest.raises(ValueError, match="CPF"):
            await create_charge(client, payer_document="529.982.247-25")
        with pytest.raises(ValueError, match="txid"):
            await client.get_charge("short")
        with pytest.raises(ValueError, match="refund_id"):
            await client.put_refund("E" * 32, "not-alnum", Decimal("1.00"), None)
    assert psp.calls == []


async def test_a_charge_read_back_carries_the_pix_that_paid_it(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        item = await psp.pay(TXID)
        charge = await client.get_charge(TXID)
    assert charge.status is ChargeStatus.CONCLUIDA
    [paid] = charge.paid
    assert paid.end_to_end_id == item["endToEndId"]
    assert paid.txid == TXID
    assert paid.amount == Decimal("10.00")
    paid_at = psp.pix[item["endToEndId"]].paid_at  # sent to the millisecond
    assert paid.paid_at == paid_at.replace(microsecond=paid_at.microsecond // 1000 * 1000)
    assert paid.paid_at.tzinfo is UTC


# Withdrawal


async def test_withdrawing_an_active_charge_removes_it(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        charge = await client.withdraw_charge(TXID)
        again = await client.withdraw_charge(TXID)  # a retry after a lost answer
    assert charge is not None and charge.status is ChargeStatus.REMOVIDA_PELO_USUARIO_RECEBEDOR
    assert psp.charges[TXID].status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    assert psp.calls_to("PATCH", "/cob/")[0].body == {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}
    assert again is not None and again.status is ChargeStatus.REMOVIDA_PELO_USUARIO_RECEBEDOR


async def test_withdrawing_a_paid_charge_answers_it_paid(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        item = await psp.pay(TXID)
        charge = await client.withdraw_charge(TXID)
    assert charge is not None and charge.status is ChargeStatus.CONCLUIDA
    assert [pix.end_to_end_id for pix in charge.paid] == [item["endToEndId"]]
    assert psp.charges[TXID].status == "CONCLUIDA"


async def test_withdrawing_a_charge_the_psp_never_made_answers_none(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        assert await client.withdraw_charge(TXID) is None


# Refunds and the webhook


async def test_a_refund_is_asked_once_by_its_id_and_settles(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        e2eid = (await psp.pay(TXID))["endToEndId"]
        refund = await client.put_refund(e2eid, "refund1", Decimal("4.00"), "Devolução parcial")
        replay = await client.put_refund(e2eid, "refund1", Decimal("4.00"), "Devolução parcial")
        deadline = time.monotonic() + 10
        settled = await client.get_refund(e2eid, "refund1")
        while settled.status is RefundStatus.EM_PROCESSAMENTO and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            settled = await client.get_refund(e2eid, "refund1")
    assert psp.calls_to("PUT", "/pix/")[0].body == {
        "valor": "4.00",
        "natureza": "ORIGINAL",
        "descricao": "Devolução parcial",
    }
    assert refund.id == "refund1" and refund.amount == Decimal("4.00")
    assert refund.status is RefundStatus.EM_PROCESSAMENTO
    assert replay.rtr_id == refund.rtr_id
    assert len(psp.pix[e2eid].refunds) == 1
    assert settled.status is RefundStatus.DEVOLVIDO
    assert settled.settled_at is not None and settled.reason is None


async def test_a_refund_the_payers_bank_refuses_says_why(tmp_path: Path) -> None:
    async with fake_psp(tmp_path, refund_settle_seconds=None) as psp, client_of(psp) as client:
        await create_charge(client)
        e2eid = (await psp.pay(TXID))["endToEndId"]
        await client.put_refund(e2eid, "refund2", Decimal("10.00"), None)
        await psp.settle_refund(e2eid, "refund2", status="NAO_REALIZADO", notify=False)
        refund = await client.get_refund(e2eid, "refund2")
        with pytest.raises(PspError) as refused:
            await client.put_refund(e2eid, "refund3", Decimal("10.01"), None)
    assert refund.status is RefundStatus.NAO_REALIZADO and refund.reason
    assert refused.value.type == ERROR + "PixDevolucaoInvalida"
    assert "descricao" not in psp.calls_to("PUT", "/pix/")[0].body


async def test_the_webhook_is_registered_for_the_key(psp: FakePsp) -> None:
    url = f"https://pay.example.com/pix-provider/v1/webhook?hmac={WEBHOOK_SECRET}"
    async with client_of(psp) as client:
        await client.put_webhook(KEY, url)
    assert psp.webhooks[KEY].url == url
    # Its own token, with the webhook's scopes (the charges' token asks for none of them).
    [asked] = psp.calls_to("POST", "/oauth/token")
    assert asked.body == "grant_type=client_credentials&scope=webhook.write+webhook.read"


# The token


async def test_one_token_serves_every_call_even_when_they_start_together(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        await asyncio.gather(*(client.get_charge(TXID) for _ in range(5)))
        await client.get_charge(TXID)
    assert psp.oauth.tokens_issued == 1
    [asked] = psp.calls_to("POST", "/oauth/token")
    assert asked.client_certificate == "tucano-pix-client"
    assert asked.headers["authorization"].startswith("Basic ")
    # The scopes decisions.md names, no more: a PSP may grant a client only those.
    assert asked.body == "grant_type=client_credentials&scope=cob.write+cob.read+pix.write+pix.read"


@pytest.mark.parametrize(("ttl", "kept_for", "renewed_after"), [(3600, 3539, 3541), (100, 89, 91)])
async def test_the_token_is_renewed_shortly_before_it_expires(
    psp: FakePsp, ttl: int, kept_for: float, renewed_after: float
) -> None:
    # A minute before it expires, or a tenth of its life before when that is shorter.
    psp.oauth.token_ttl_seconds = ttl
    now = [1000.0]

    def clock() -> float:
        return now[0]

    async with client_of(psp, clock=clock) as client:
        await create_charge(client)
        now[0] += kept_for
        await client.get_charge(TXID)
        assert psp.oauth.tokens_issued == 1
        now[0] = 1000.0 + renewed_after
        await client.get_charge(TXID)
        assert psp.oauth.tokens_issued == 2
    tokens = [call.headers["authorization"] for call in psp.calls_to(None, "/cob/")]
    assert tokens[0] == tokens[1] != tokens[2]


async def test_a_token_the_psp_forgot_is_replaced_once(psp: FakePsp) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        psp.oauth.revoke()
        charge = await client.get_charge(TXID)
        assert charge.txid == TXID
        assert psp.oauth.tokens_issued == 2
        assert [c.status for c in psp.calls_to("GET", "/cob/")] == [401, 200]

        psp.fail_with(401, route="/cob/")  # a PSP that refuses every token
        with pytest.raises(PspError) as refused:
            await client.get_charge(TXID)
    assert refused.value.status == 401
    assert psp.oauth.tokens_issued == 3
    assert len(psp.calls_to("GET", "/cob/")) == 4


async def test_wrong_client_credentials_fail_at_once(psp: FakePsp) -> None:
    async with client_of(psp, client_secret="not-the-secret") as client:
        with pytest.raises(PspError) as refused:
            await client.get_charge(TXID)
    assert (refused.value.status, refused.value.type) == (401, "invalid_client")
    assert len(psp.calls_to("POST", "/oauth/token")) == 1
    assert psp.calls_to(None, "/cob/") == []


# Failures


async def test_a_psp_that_fails_twice_then_answers_is_retried(psp: FakePsp) -> None:
    psp.fail_with(500, times=1, route="/cob/")
    psp.fail_with(502, times=1, route="/cob/", body="<html>Bad gateway</html>")
    async with client_of(psp) as client:
        charge = await create_charge(client)
    assert charge.pix_copia_e_cola
    assert [c.status for c in psp.calls_to("PUT", "/cob/")] == [500, 502, 201]
    assert len(psp.charges) == 1


async def test_a_psp_that_asks_to_slow_down_is_retried(psp: FakePsp) -> None:
    psp.fail_with(429, times=2, route="/cob/")
    async with client_of(psp) as client:
        await create_charge(client)
    assert [c.status for c in psp.calls_to("PUT", "/cob/")] == [429, 429, 201]


async def test_an_answer_that_is_no_charge_is_an_error_and_not_retried(psp: FakePsp) -> None:
    psp.fail_with(200, route="/cob/", body="<html>Welcome to our portal</html>")
    async with client_of(psp) as client:
        with pytest.raises(PspError, match="Unreadable charge"):
            await client.get_charge(TXID)
    assert len(psp.calls_to("GET", "/cob/")) == 1


async def test_a_psp_that_keeps_failing_raises_its_problem_after_three_attempts(
    psp: FakePsp,
) -> None:
    psp.fail_with(503, route="/cob/")
    async with client_of(psp) as client:
        with pytest.raises(PspError) as failed:
            await client.get_charge(TXID)
    assert failed.value.status == 503
    assert failed.value.type == ERROR + "ServicoIndisponivel"
    assert len(psp.calls_to("GET", "/cob/")) == 3


async def test_a_request_the_psp_refuses_is_not_retried(tmp_path: Path) -> None:
    async with fake_psp(tmp_path, known_keys={"other@example.com"}) as psp, client_of(psp) as c:
        with pytest.raises(PspError) as refused:
            await create_charge(c)
    assert refused.value.status == 400
    assert refused.value.type == ERROR + "CobOperacaoInvalida"
    assert refused.value.title
    assert [v.property for v in refused.value.violations] == ["cob.chave"]
    assert len(psp.calls_to("PUT", "/cob/")) == 1


async def test_a_psp_that_hangs_is_unavailable_after_the_retries(psp: FakePsp) -> None:
    psp.hang(5, route="/cob/")
    started = time.monotonic()
    async with client_of(psp, timeout_seconds=0.3) as client:
        with pytest.raises(PspUnavailable, match=r"no answer within 0\.3 s"):
            await client.get_charge(TXID)
    assert len(psp.calls_to("GET", "/cob/")) == 3
    assert time.monotonic() - started < 4


async def test_a_psp_that_is_down_is_unavailable_and_reached_again_once_up(
    psp: FakePsp,
) -> None:
    async with client_of(psp) as client:
        await create_charge(client)
        await psp.down()
        with pytest.raises(PspUnavailable, match="no connection"):
            await client.get_charge(TXID)
        await psp.up()
        assert (await client.get_charge(TXID)).txid == TXID


async def test_without_a_client_certificate_the_psp_is_not_reached(psp: FakePsp) -> None:
    async with client_of(psp, cert_file=None, key_file=None) as client:
        with pytest.raises(PspUnavailable):
            await client.get_charge(TXID)
    assert psp.oauth.tokens_issued == 0
    assert psp.calls == []


async def test_a_psp_whose_certificate_is_not_trusted_is_not_retried(psp: FakePsp) -> None:
    async with client_of(psp, ca_file=None) as client:  # the system's CAs only
        with capture_logs() as logs, pytest.raises(PspUnavailable, match="TLS"):
            await client.get_charge(TXID)
    assert psp.calls == []
    assert [entry["attempt"] for entry in logs] == [1]


async def test_a_certificate_without_its_key_is_refused_when_the_client_is_made(
    psp: FakePsp,
) -> None:
    with pytest.raises(ConfigurationError, match="TUCANO_PIX_CERT_FILE"):
        ApiPixClient(
            api_url=psp.api_url,
            token_url=psp.token_url,
            client_id="id",
            client_secret="secret",
            cert_file=str(psp.client_cert_file),
            key_file=str(psp.ca_file),  # not the certificate's key
        )


# What is logged and counted


async def test_the_logs_name_each_call_and_never_a_secret_token_or_payer(psp: FakePsp) -> None:
    url = f"https://pay.example.com/pix-provider/v1/webhook?hmac={WEBHOOK_SECRET}"
    with capture_logs() as logs:
        async with client_of(psp) as client:
            psp.fail_with(500, times=1, route="/cob/")
            await create_charge(client)
            psp.oauth.revoke()
            await client.get_charge(TXID)
            with pytest.raises(PspError):
                await create_charge(client, payer_document="12345678900", amount=Decimal("1"))
            await client.put_webhook(KEY, url)
    text = repr(logs)
    tokens = {
        c.headers["authorization"].split()[1] for c in psp.calls if "authorization" in c.headers
    }
    for secret in (psp.oauth.client_secret, *tokens, CPF, "12345678900", PAYER, WEBHOOK_SECRET):
        assert secret not in text
    assert [(e["event"], e["operation"], e.get("status")) for e in logs] == [
        ("pix_provider_call_failed", "put_charge", 500),
        ("pix_provider_call", "put_charge", 201),
        ("pix_provider_call_failed", "get_charge", 401),
        ("pix_provider_call", "get_charge", 200),
        ("pix_provider_call_failed", "put_charge", 400),
        ("pix_provider_call", "put_webhook", 200),
    ]
    assert logs[0]["log_level"] == "warning" and logs[1]["log_level"] == "info"
    assert logs[0]["problemType"] == ERROR + "ErroInternoDoServidor"
    assert logs[0]["attempt"] == 1 and logs[0]["txid"] == TXID
    assert logs[1]["attempts"] == 2 and logs[1]["durationMs"] >= 0
    assert logs[4]["violations"] == ["cob.devedor.cpf"]


async def test_each_exchange_is_counted_by_operation_and_outcome(psp: FakePsp) -> None:
    def counts() -> list[float]:
        name = "tucano_pix_provider_calls_total"
        return [
            sample(name, operation="token", outcome="success"),
            sample(name, operation="put_charge", outcome="success"),
            sample(name, operation="put_charge", outcome="failed"),
            sample(name, operation="put_charge", outcome="rejected"),
            sample(name, operation="get_charge", outcome="unavailable"),
            sample("tucano_pix_provider_call_seconds_count", operation="put_charge"),
        ]

    before = counts()
    async with client_of(psp, timeout_seconds=0.2) as client:
        psp.fail_with(500, times=1, route="/cob/")
        await create_charge(client)
        with pytest.raises(PspError):
            await create_charge(client, key="")
        psp.hang(2, times=1, route="/cob/")
        await client.get_charge(TXID)
    after = counts()
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1, 1, 1, 3]


# Settings


@pytest.fixture
def api_pix_env(no_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "client.pem").write_text("certificate")
    (tmp_path / "client.key").write_text("key")
    env = {
        "TUCANO_PIX_PROVIDER": "api-pix",
        "TUCANO_PIX_API_URL": "https://pix.example.com/api/v2/",
        "TUCANO_PIX_TOKEN_URL": "https://pix.example.com/oauth/token",
        "TUCANO_PIX_CLIENT_ID": "tucano",
        "TUCANO_PIX_CLIENT_SECRET": "client-secret",
        "TUCANO_PIX_CERT_FILE": str(tmp_path / "client.pem"),
        "TUCANO_PIX_KEY_FILE": str(tmp_path / "client.key"),
        "TUCANO_PIX_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_the_pix_settings_are_read(api_pix_env: dict[str, str]) -> None:
    settings = load_settings()
    assert settings.pix_api_url == "https://pix.example.com/api/v2"
    assert settings.pix_client_secret is not None
    assert settings.pix_client_secret.get_secret_value() == "client-secret"
    assert settings.pix_ca_file == ""
    assert (settings.pix_timeout_seconds, settings.pix_reconciliation_seconds) == (10, 60)
    assert "client-secret" not in repr(settings) and WEBHOOK_SECRET not in repr(settings)


def test_the_pix_settings_default_to_nothing_and_are_not_needed_by_other_providers() -> None:
    settings = Settings(_env_file=None, pix_provider="events")  # type: ignore[call-arg]
    assert (settings.pix_api_url, settings.pix_client_secret, settings.pix_cert_file) == (
        "",
        None,
        "",
    )


@pytest.mark.parametrize(
    "missing",
    [
        "TUCANO_PIX_API_URL",
        "TUCANO_PIX_TOKEN_URL",
        "TUCANO_PIX_CLIENT_ID",
        "TUCANO_PIX_CLIENT_SECRET",
        "TUCANO_PIX_WEBHOOK_SECRET",
    ],
)
def test_api_pix_needs_its_psp_and_its_webhook_secret(
    api_pix_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.setenv(missing, "")
    with pytest.raises(ConfigurationError, match=f"^{missing} is required"):
        load_settings()


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("TUCANO_PIX_API_URL", "http://pix.example.com/api/v2", "must be an https URL"),
        ("TUCANO_PIX_TOKEN_URL", "pix.example.com/oauth/token", "absolute https URL"),
        ("TUCANO_PIX_TOKEN_URL", "https://pix.example.com:99999/token", "not a URL"),
        ("TUCANO_PIX_KEY_FILE", "", "go together"),
        ("TUCANO_PIX_CA_FILE", "/nonexistent/ca.pem", "not a file this process can read"),
        ("TUCANO_PIX_WEBHOOK_SECRET", "short", "at least 16 characters"),
        ("TUCANO_PIX_WEBHOOK_SECRET", "with spaces and = signs", "at least 16 characters"),
        ("TUCANO_PIX_TIMEOUT_SECONDS", "0", "greater than 0"),
        ("TUCANO_PIX_RECONCILIATION_SECONDS", "inf", "finite"),
    ],
)
def test_bad_pix_settings_name_the_variable(
    api_pix_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
    problem: str,
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=name) as refused:
        load_settings()
    assert problem in str(refused.value)


def test_plain_http_reaches_a_psp_simulator_on_loopback_in_sandbox_only(
    api_pix_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUCANO_PIX_API_URL", "http://127.0.0.1:8443/api/v2")
    assert load_settings().pix_api_url == "http://127.0.0.1:8443/api/v2"
    monkeypatch.setenv("TUCANO_ENVIRONMENT", "production")
    monkeypatch.setenv("TUCANO_SECRET_KEY", TEST_SECRET_KEY)
    monkeypatch.setenv("TUCANO_PUBLIC_URL", "https://pay.example.com")
    with pytest.raises(ConfigurationError, match="TUCANO_PIX_API_URL must be an https URL"):
        load_settings()


async def test_the_client_is_made_from_the_settings(psp: FakePsp) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        pix_webhook_secret=WEBHOOK_SECRET,
        pix_timeout_seconds=3,
        **{name.removeprefix("TUCANO_").lower(): value for name, value in psp.tucano_env().items()},
    )
    client = ApiPixClient.from_settings(settings)
    try:
        assert (await create_charge(client)).txid == TXID
    finally:
        await client.close()
