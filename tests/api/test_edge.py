"""The outermost layer, seen from a client's socket: what a connection that goes away leaves in
the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
from structlog.testing import capture_logs

from tests.support.payer import APPROVED_VISA, Payer, card_form, form_action
from tests.support.payment_links import BASE, create, tx, window
from tests.support.processes import access_token, clean_env, created_client, start_serve
from tests.support.service import RunningService


def test_a_client_that_leaves_before_its_pipelined_answers_is_no_error(tmp_path: Path) -> None:
    server = start_serve(tmp_path)
    try:
        address = urlsplit(server.base_url)
        for attempt in range(60):
            # Requests in one write, then gone (a reset, or a half-close after reading a
            # little): the server still runs the queued ones and finds the connection closed
            # when it answers them.
            with socket.create_connection((address.hostname, address.port)) as client:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 30)
                if attempt % 2:
                    client.recv(100)
        time.sleep(1)
        logs = server.logs()
    finally:
        server.stop()
    # (Whether the server finds the connection closed depends on timing; here it does for many
    # of them, and without the fix each one logged an error, with a traceback.)
    assert "unhandled_error" not in logs and "Traceback" not in logs
    assert '"level": "error"' not in logs


def test_a_body_that_does_not_arrive_in_time_is_a_408_and_the_connection_closes(
    tmp_path: Path,
) -> None:
    env = clean_env(TUCANO_REQUEST_BODY_TIMEOUT_SECONDS="1")
    server = start_serve(tmp_path, env)
    try:
        with httpx.Client(base_url=server.base_url) as http:
            token = access_token(http, created_client(tmp_path, env, customer_id=5))
        authorization = f"Authorization: Bearer {token}\r\n".encode()
        address = urlsplit(server.base_url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as client:
            # Half a body, then nothing: a stalled or trickling client (with credentials: one
            # without is answered 401 before its body).
            client.sendall(
                b"POST /webhook/v1/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\n"
                + authorization
                + b"Content-Length: 100\r\n\r\n"
                + b'{"targetUrl": "https://'
            )
            started = time.monotonic()
            answer = b""
            while chunk := client.recv(65536):  # until the server closes the connection
                answer += chunk
            waited = time.monotonic() - started
        # A whole answer within the deadline and a little, then closed.
        assert 0.9 < waited < 8, waited
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), answer
        assert b"connection: close" in head.lower()
        error = json.loads(body)
        assert error["errorCode"] == 48
        assert error["errors"] == ["the request body must arrive within 1 seconds of the request"]
        # A body that arrives in time, in pieces, is read as usual (and found to lack fields).
        with socket.create_connection((address.hostname, address.port), timeout=10) as client:
            client.sendall(
                b"POST /webhook/v1/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\n" + authorization + b"Content-Length: 2\r\nConnection: close\r\n\r\n{"
            )
            time.sleep(0.3)
            client.sendall(b"}")
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400 "), answer
        # The token endpoint answers the RFC 6749 way, a 408 too.
        with socket.create_connection((address.hostname, address.port), timeout=10) as client:
            client.sendall(
                b"POST /oauth/v1/token HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 50\r\n\r\n"
                b"grant_type=client_credentials"
            )
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), answer
        assert json.loads(body)["error"] == "invalid_request"
        # A path is logged as it was sent, trailing slash and all.
        assert httpx.get(server.base_url + "/health/").status_code == 200
        logs = server.wait_for_log('"path": "/health/"')
        assert '"path": "/health/"' in logs
    finally:
        server.stop()
    assert "Traceback" not in logs


async def test_every_answer_says_nosniff_once(service: RunningService) -> None:
    merchant = await service.merchant()
    link = await create(merchant)
    checkout = urlsplit(link["urlPayment"])
    answers = [
        await merchant.get("/webhook/v1/list"),
        await merchant.get("/webhook/v1/999999"),
        await service.http.get("/webhook/v1/list"),  # 401
        await service.http.get("/no/such/route"),
        await merchant.get("/webhook/v1/list", headers={"x-padding": "a" * 40_000}),  # 431
        await service.http.post("/oauth/v1/token", data={"grant_type": "password"}),
        await service.http.get("/health"),
        await merchant.get(
            f"{BASE}/report", params=window(), headers={**tx(), "Accept": "text/csv"}
        ),
        # The checkout sets its own security headers, this one among them.
        await service.http.get(
            f"{checkout.path}?{checkout.query}", headers={"Accept": "text/html"}
        ),
    ]
    for answer in answers:
        assert answer.headers.get_list("x-content-type-options") == ["nosniff"], (
            answer.request.url,
            answer.status_code,
        )
    assert answers[-1].status_code == 200
    assert answers[-1].headers["content-type"].startswith("text/html")


async def raw_exchange(base_url: str, head: bytes, body: bytes, *, wait: float) -> bytes:
    """Send `head` and `body` (less than the head declares) on a socket of their own; what the
    server answers within `wait` seconds."""
    address = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    writer.write(head + body)
    await writer.drain()
    answer = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(wait):
            while chunk := await reader.read(65536):
                answer += chunk
    writer.close()
    return answer


async def test_a_request_without_credentials_is_answered_401_before_its_body(
    service: RunningService,
) -> None:
    for path in ("/webhook/v1/create", "/payment-link/v1", "/internal/v1/events/batch"):
        started = time.monotonic()
        # Headers, a first few bytes of a body, then nothing: the body never comes whole.
        answer = await raw_exchange(
            service.base_url,
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n".encode(),
            b'{"targetUrl": ',
            wait=5,
        )
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 401 "), (path, answer)
        assert b"connection: close" in head.lower()  # and the connection closed: read to EOF
        assert time.monotonic() - started < 4  # well before the 10 s the body would be given
        assert json.loads(body)["errorCode"] == 10


async def test_a_checkout_payer_who_leaves_mid_post_is_no_error(
    service: RunningService,
) -> None:
    merchant = await service.merchant()
    link = await create(merchant)
    payer = Payer(service, link)
    page = await payer.page()
    fields = card_form(page, APPROVED_VISA)
    body = urlencode(fields).encode()
    address = urlsplit(service.base_url)
    with capture_logs() as logs:
        for _ in range(3):
            _, writer = await asyncio.open_connection(address.hostname, address.port)
            writer.write(
                f"POST {form_action(page, 'data-card-form')} HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n"
                f"Content-Length: {len(body) + 500}\r\n\r\n".encode()
                + body[:40]
            )
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.close()  # the browser tab closed, the phone lost its signal
        await asyncio.sleep(0.5)
    await payer.close()
    assert not [entry for entry in logs if entry["log_level"] in ("error", "critical")], logs
    metrics = (await service.http.get("/metrics")).text
    assert 'route="/checkout/{linkPaymentUuid}/card",status="500"' not in metrics
    assert 'route="/checkout/{linkPaymentUuid}/card",status="499"' in metrics
