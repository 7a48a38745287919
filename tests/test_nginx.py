"""deploy/nginx/tucano.conf, as shipped but for its addresses and certificate, run by Debian's
nginx in front of a real `tucano serve`: the proxy's bounds hold, and honest clients get through
(docs/security.md, "What the process bounds, and what the proxy must")."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.processes import access_token, create_link_over, free_port, serve_with_a_client

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "deploy" / "nginx" / "tucano.conf"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
ATTACKER = "127.0.0.2"
HONEST = "127.0.0.3"

pytestmark = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx)"
)


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def site_for_test(upstream_port: int, port: int, cert: Path, key: Path) -> str:
    """The shipped file with this test's addresses: what an operator edits, and nothing else."""
    text = SHIPPED.read_text()
    replacements = [
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};"),
        ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
        ("listen 80;", f"listen 127.0.0.1:{free_port()};"),
        ("/etc/ssl/tucano/fullchain.pem", str(cert)),
        ("/etc/ssl/tucano/privkey.pem", str(key)),
    ]
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    # No IPv6 listener: the test machine may have no ::1.
    return re.sub(r"^\s*listen \[::\]:\d+( ssl)?;\n", "", text, flags=re.M)


@contextlib.contextmanager
def nginx_in_front(directory: Path, upstream_port: int) -> Iterator[tuple[int, Path]]:
    assert NGINX is not None
    cert, key = self_signed(directory)
    port = free_port()
    (directory / "tucano.conf").write_text(site_for_test(upstream_port, port, cert, key))
    # The main file Debian's nginx.conf would be, pointed at this test's directory.
    (directory / "nginx.conf").write_text(
        f"""
{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log {directory}/access.log;
    client_body_temp_path {directory}/client_body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    include {directory}/tucano.conf;
}}
"""
    )
    process = subprocess.Popen(
        [NGINX, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            with contextlib.suppress(OSError), socket_to(port):
                break
            assert time.monotonic() < deadline, "nginx did not listen"
            time.sleep(0.05)
        yield port, cert
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextlib.contextmanager
def socket_to(port: int) -> Iterator[None]:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=1):
        yield


async def stall(
    port: int, trusted: ssl.SSLContext, token: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """From the attacker's address, over TLS: a POST whose body starts and never finishes."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=trusted, local_addr=(ATTACKER, 0)
    )
    writer.write(
        b"POST /payment-link/v1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {token}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
        + b'{"amount": '
    )
    await writer.drain()
    return reader, writer


async def answer_within(reader: asyncio.StreamReader, seconds: float) -> bytes | None:
    """What the server answered within `seconds`: b"" if it closed the connection without an
    answer the client could read (a reset discards what was not read yet), None if nothing."""
    try:
        async with asyncio.timeout(seconds):
            return await reader.read(65536)
    except TimeoutError:
        return None
    except (ConnectionError, ssl.SSLError):
        return b""


def status_of(answer: bytes | None) -> int | None:
    return int(answer.split()[1]) if answer else None


def test_nginx_as_shipped_bounds_one_address_and_serves_the_others(tmp_path: Path) -> None:
    server, client = serve_with_a_client(tmp_path)
    upstream_port = int(server.base_url.rsplit(":", 1)[1])
    nginx_dir = tmp_path / "nginx"
    nginx_dir.mkdir()
    try:
        with nginx_in_front(nginx_dir, upstream_port) as (port, cert):
            trusted = ssl.create_default_context(cafile=str(cert))
            honest = httpx.Client(
                base_url=f"https://127.0.0.1:{port}",
                transport=httpx.HTTPTransport(local_address=HONEST, verify=trusted),
                timeout=10,
            )
            token = access_token(honest, client)
            # A body over Tucano's limit stops at nginx, in Tucano's error body.
            too_large = honest.post(
                "/payment-link/v1",
                headers={"Authorization": f"Bearer {token}"},
                content=b"x" * (2 * 1024 * 1024),
            )
            assert too_large.status_code == 413
            assert too_large.json()["errorCode"] == 41

            async def attack() -> None:
                stalled = await asyncio.gather(*(stall(port, trusted, token) for _ in range(120)))
                answers = await asyncio.gather(*(answer_within(r, 3) for r, _ in stalled))
                statuses = [status_of(a) for a in answers]
                # 50 held by nginx, waiting for their bodies; the rest refused at once (a few
                # closed so fast after the answer that the reset came first).
                assert answers.count(None) == 50, Counter(statuses)
                assert statuses.count(429) >= 60, Counter(statuses)
                assert statuses.count(429) + answers.count(b"") == 70
                refused = next(a for a in answers if a and status_of(a) == 429)
                head, _, body = refused.partition(b"\r\n\r\n")
                assert b"retry-after: 1" in head.lower()
                assert json.loads(body)["errorCode"] == 55
                # Meanwhile another address creates a link through nginx as usual.
                created = await asyncio.to_thread(create_link_over, honest, token)
                assert created.status_code == 200, created.text
                # nginx gives up on a body that pauses for 10 s: it resets the connection.
                held = [r for (r, _), a in zip(stalled, answers, strict=True) if a is None]
                late = await asyncio.gather(*(answer_within(r, 15) for r in held))
                assert late == [b""] * 50
                for _, writer in stalled:
                    writer.close()

            asyncio.run(attack())
            honest.close()
        logs = server.logs()
    finally:
        server.stop()
    # Tucano never saw a stalled request: nginx holds a body until it is whole.
    assert '"status": 408' not in logs and '"status": 429' not in logs
    assert logs.count('"path": "/payment-link/v1"') == 1
