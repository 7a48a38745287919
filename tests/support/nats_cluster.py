"""A NATS JetStream cluster of three servers on loopback ports, each with a store of its own,
for the tests of the queue on NATS (skipped where /usr/sbin/nats-server is not installed)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import free_port

NATS_SERVER = "/usr/sbin/nats-server"
CLUSTER_SIZE = 3
READY_SECONDS = 20


@dataclass
class NatsCluster:
    client_ports: list[int]
    processes: list[subprocess.Popen[bytes]]

    @property
    def url(self) -> str:
        """The servers, comma-separated, as TUCANO_NATS_URL takes them."""
        return ",".join(f"nats://127.0.0.1:{port}" for port in self.client_ports)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_for_jetstream(ports: list[int], logs: list[Path]) -> None:
    """Until every server answers and the cluster has elected its JetStream leader."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if all(_listening(p) for p in ports) and any(
            "JetStream cluster new metadata leader" in log.read_text(errors="replace")
            or "Self is new JetStream cluster metadata leader" in log.read_text(errors="replace")
            for log in logs
        ):
            return
        time.sleep(0.1)
    raise RuntimeError("the NATS cluster did not form:\n" + logs[0].read_text(errors="replace"))


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    if not shutil.which(NATS_SERVER):
        pytest.skip(f"{NATS_SERVER} is not installed")
    root = tmp_path_factory.mktemp("nats")
    clients = [free_port() for _ in range(CLUSTER_SIZE)]
    routes = [free_port() for _ in range(CLUSTER_SIZE)]
    all_routes = ",".join(f"nats://127.0.0.1:{p}" for p in routes)
    processes, logs = [], []
    for i in range(CLUSTER_SIZE):
        store, log = root / f"n{i}", root / f"n{i}.log"
        store.mkdir()
        log.touch()
        logs.append(log)
        command = [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(clients[i]), "-n", f"n{i}"]
        command += ["--cluster_name", "tucano-test", "--cluster", f"nats://127.0.0.1:{routes[i]}"]
        command += ["--routes", all_routes, "-sd", str(store), "-l", str(log)]
        processes.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    try:
        _wait_for_jetstream(clients, logs)
        yield NatsCluster(clients, processes)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
