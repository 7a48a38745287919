"""Running the installed `tucano` command as a real process, the way an operator does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

TUCANO = str(Path(sys.executable).parent / "tucano")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**overrides: str) -> dict[str, str]:
    """The environment without any TUCANO_ variable of the caller, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUCANO_")}
    env.update(overrides)
    return env


def run_tucano(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TUCANO, *args],
        cwd=cwd,
        env=dict(env or clean_env()),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class ServeProcess:
    process: subprocess.Popen[str]
    base_url: str
    log_path: Path

    def logs(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, text: str, timeout: float = 10) -> str:
        """The logs once they hold `text` (a request is logged after its answer is sent, so
        a client can read its answer before the line is written)."""
        deadline = time.monotonic() + timeout
        while text not in (logs := self.logs()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return logs

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)


def start_serve(
    cwd: Path, env: Mapping[str, str] | None = None, *extra: str, command: str = "serve"
) -> ServeProcess:
    port = free_port()
    return start_listening(
        [TUCANO, command, "--port", str(port), *extra],
        port=port,
        cwd=cwd,
        env=env,
        log_path=cwd / f"{command}-{port}.log",
        name=f"tucano {command}",
    )


def start_listening(
    argv: list[str],
    *,
    port: int,
    cwd: Path,
    env: Mapping[str, str] | None,
    log_path: Path,
    name: str,
    health_path: str = "/health",
) -> ServeProcess:
    """Run `argv`, which listens on `port`, until `health_path` answers 200."""
    log_file = log_path.open("w")
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env or clean_env()),
        stdout=log_file,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited: {log_path.read_text()}")
        try:
            if httpx.get(base_url + health_path, timeout=1).status_code == 200:
                return ServeProcess(process, base_url, log_path)
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{name} did not become healthy: {log_path.read_text()}")


def start_worker(
    cwd: Path, env: Mapping[str, str], name: str = "worker", *extra: str
) -> ServeProcess:
    """`tucano worker` (no HTTP port unless `extra` gives it --metrics-port: it is up once its
    process runs)."""
    log_path = cwd / f"{name}-{time.monotonic_ns()}.log"
    process = subprocess.Popen(
        [TUCANO, "worker", *extra],
        cwd=cwd,
        env=dict(env),
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    return ServeProcess(process, "", log_path)


def wait_for_port(process: ServeProcess, port: int, timeout: float = 60) -> None:
    """Until something listens on 127.0.0.1:`port`; fail if `process` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.process.poll() is not None:
            raise RuntimeError(f"the process exited: {process.logs()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}: {process.logs()}")


def created_client(cwd: Path, env: Mapping[str, str], customer_id: int) -> dict[str, str]:
    """A new API client of `customer_id`, made with `tucano clients create` (its JSON)."""
    made = run_tucano("clients", "create", "--customer-id", str(customer_id), cwd=cwd, env=env)
    assert made.returncode == 0, made.stderr
    client: dict[str, str] = json.loads(made.stdout)
    return client


def access_token(http: httpx.Client, client: Mapping[str, str]) -> str:
    """An access token for `client`, asked for through `http`."""
    answer = http.post(
        "/oauth/v1/token",
        data={
            "grant_type": "client_credentials",
            "client_id": client["clientId"],
            "client_secret": client["clientSecret"],
        },
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["access_token"]
    return token


def serve_with_a_client(cwd: Path, customer_id: int = 7) -> tuple[ServeProcess, dict[str, str]]:
    """`tucano serve --no-worker` on a SQLite file of its own, JSON logs and no per-client rate
    limit in the way, and an API client of `customer_id` made before it started."""
    env = clean_env(
        TUCANO_DATABASE_URL=f"sqlite+aiosqlite:///{cwd / 'tucano.db'}",
        TUCANO_LOG_FORMAT="json",
        TUCANO_RATE_LIMIT="100000/second",
    )
    migrated = run_tucano("migrate", cwd=cwd, env=env)
    assert migrated.returncode == 0, migrated.stderr
    client = created_client(cwd, env, customer_id)
    return start_serve(cwd, env, "--no-worker"), client


def create_link_over(http: httpx.Client, token: str) -> httpx.Response:
    """POST a small payment link through `http` (a real process, a proxy in front of one)."""
    return http.post(
        "/payment-link/v1",
        headers={"Authorization": f"Bearer {token}", "x-transaction-id": str(uuid.uuid4())},
        json={
            "payerName": "Maria da Silva",
            "registrationNumber": "529.982.247-25",
            "amount": 10.00,
            "numbersInstallments": 1,
            "expirationDays": 5,
            "description": "Pedido 42",
        },
    )
