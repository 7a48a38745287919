"""A NATS JetStream cluster of three servers on loopback ports, each with a store of its own,
for the tests of the queue on NATS (skipped where /usr/sbin/nats-server is not installed)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    commands: list[list[str]]

    @property
    def url(self) -> str:
        """The servers, comma-separated, as TUCANO_NATS_URL takes them."""
        return ",".join(f"nats://127.0.0.1:{port}" for port in self.client_ports)

    def start_server(self, index: int) -> subprocess.Popen[bytes]:
        """Start server `index` (again, after a kill: it rejoins with its store)."""
        return subprocess.Popen(
            self.commands[index], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def kill_server(self, index: int) -> None:
        """SIGKILL server `index`, as a crash would."""
        self.processes[index].kill()
        self.processes[index].wait()

    def restart_server(self, index: int) -> None:
        self.processes[index] = self.start_server(index)

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


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


@contextmanager
def started_cluster(root: Path, *, name: str = "tucano-test") -> Iterator[NatsCluster]:
    """Three servers with their stores and logs under `root`, stopped on the way out (also
    used by the benchmarks, bench/queue_faults.py and bench/queue_scale.py)."""
    clients = [free_port() for _ in range(CLUSTER_SIZE)]
    routes = [free_port() for _ in range(CLUSTER_SIZE)]
    all_routes = ",".join(f"nats://127.0.0.1:{p}" for p in routes)
    commands, logs = [], []
    for i in range(CLUSTER_SIZE):
        store, log = root / f"n{i}", root / f"n{i}.log"
        store.mkdir(parents=True, exist_ok=True)
        log.touch()
        logs.append(log)
        command = [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(clients[i]), "-n", f"n{i}"]
        command += ["--cluster_name", name, "--cluster", f"nats://127.0.0.1:{routes[i]}"]
        command += ["--routes", all_routes, "-sd", str(store), "-l", str(log)]
        commands.append(command)
    cluster = NatsCluster(clients, [], commands)
    for i in range(CLUSTER_SIZE):
        cluster.processes.append(cluster.start_server(i))
    try:
        _wait_for_jetstream(clients, logs)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    if not shutil.which(NATS_SERVER):
        pytest.skip(f"{NATS_SERVER} is not installed")
    with started_cluster(tmp_path_factory.mktemp("nats")) as cluster:
        yield cluster
