"""`tucano serve` with TUCANO_PIX_PROVIDER=api-pix as an operator runs it, against a fake PSP:
the webhook registered with `tucano pix webhook register`, the charge made by the background
jobs, the link paid by the PSP's webhook."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx

from tests.support.fake_psp_thread import fake_psp_in_thread
from tests.support.processes import (
    TUCANO,
    access_token,
    clean_env,
    create_link_over,
    created_client,
    free_port,
    run_tucano,
    start_listening,
)

PIX_KEY = "3f2a9c1e-7b4d-4e8f-9a6b-1c2d3e4f5a6b"
SECRET = "webhook-secret-0123456789"


def test_serve_with_api_pix_charges_a_link_and_the_psps_webhook_pays_it(tmp_path: Path) -> None:
    with fake_psp_in_thread(tmp_path / "psp") as running:
        psp = running.psp
        port = free_port()
        env = clean_env(
            TUCANO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tucano.db'}",
            TUCANO_PUBLIC_URL=f"http://127.0.0.1:{port}",
            TUCANO_PIX_WEBHOOK_SECRET=SECRET,
            TUCANO_LOG_FORMAT="json",
            **psp.tucano_env(),
        )
        assert run_tucano("migrate", cwd=tmp_path, env=env).returncode == 0
        client = created_client(tmp_path, env, customer_id=7)
        profile = run_tucano(
            *("customers", "set", "--customer-id", "7", "--merchant-name", "Loja Tucano"),
            *("--merchant-city", "Sao Paulo", "--pix-key", PIX_KEY),
            cwd=tmp_path,
            env=env,
        )
        assert profile.returncode == 0, profile.stderr
        registered = run_tucano(
            "pix", "webhook", "register", "--customer-id", "7", cwd=tmp_path, env=env
        )
        assert registered.returncode == 0, registered.stderr
        assert json.loads(registered.stdout)["pixKey"] == PIX_KEY
        assert SECRET not in registered.stdout
        assert psp.webhooks[PIX_KEY].url == (
            f"http://127.0.0.1:{port}/pix-provider/v1/webhook?hmac={SECRET}"
        )
        server = start_listening(
            [TUCANO, "serve", "--port", str(port)],
            port=port,
            cwd=tmp_path,
            env=env,
            log_path=tmp_path / "serve.log",
            name="tucano serve",
        )
        try:
            with httpx.Client(base_url=server.base_url, timeout=10) as http:
                token = access_token(http, client)
                link = create_link_over(http, token).json()
                [call] = running.wait_for_calls("PUT", "/cob", timeout=20)
                txid = call.route.rsplit("/", 1)[1]
                running.pay(txid)
                deadline = time.monotonic() + 10
                status = ""
                while time.monotonic() < deadline and status != "PAID":
                    answer = http.get(
                        f"/payment-link/v1/{link['linkPaymentUuid']}",
                        headers={
                            "Authorization": f"Bearer {token}",
                            "x-transaction-id": str(uuid.uuid4()),
                        },
                    )
                    status = answer.json()["status"]["description"]
                    time.sleep(0.1)
                assert status == "PAID"
        finally:
            server.stop()
        logs = server.logs()
    assert "pix_payment_paid_link" in logs
    assert SECRET not in logs and psp.oauth.client_secret not in logs
