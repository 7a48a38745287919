"""The tables `bench/servers.py` prints (markdown), and what they are made of."""

from __future__ import annotations

import os
import platform
import resource
import statistics
from collections import Counter
from dataclasses import dataclass, field
from importlib.metadata import version

from bench.deliveries import Placement
from bench.payment_links import percentile
from bench.slow_headers import SlowReport

PACKAGES = ("uvicorn", "granian", "uvloop", "httptools", "fastapi", "aiohttp")
BARE = "bare `GET /`"


@dataclass
class Measured:
    """One scenario on one server, over every round."""

    ok: int = 0
    seconds: float = 0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    round_rates: list[float] = field(default_factory=list)
    # How busy the servers' CPU and the load's CPU were (other processes on them included).
    busy: list[tuple[float, ...]] = field(default_factory=list)
    server_cpu_seconds: float = 0  # used by the server process, all its threads

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0


def merge(into: Measured, one: Measured) -> None:
    into.ok += one.ok
    into.seconds += one.seconds
    into.latencies += one.latencies
    into.errors += one.errors
    into.round_rates += one.round_rates
    into.busy += one.busy
    into.server_cpu_seconds += one.server_cpu_seconds


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counter.most_common()) or "0"


def busy_text(busy: list[tuple[float, ...]]) -> str:
    """The mean busy share of each CPU the placement names, over the rounds."""
    if not busy:
        return "-"
    return "/".join(f"{statistics.mean(b[i] for b in busy):.0%}" for i in range(len(busy[0])))


def throughput_table(results: dict[tuple[str, str], Measured]) -> str:
    rows = []
    for (scenario, server), one in results.items():
        bare_same = results[(BARE, server)].rate
        bare_uvicorn = results[(BARE, "uvicorn")].rate
        rows.append(
            [
                server,
                scenario,
                f"{one.rate:,.0f}",
                f"{min(one.round_rates):,.0f}-{max(one.round_rates):,.0f}",
                f"{statistics.median(one.latencies):.1f}" if one.latencies else "-",
                f"{percentile(one.latencies, 0.99):.1f}" if one.latencies else "-",
                counts(one.errors),
                f"{one.rate / bare_same:.0%}",
                f"{one.rate / bare_uvicorn:.0%}",
                f"{one.server_cpu_seconds / one.ok * 1e6:,.0f}" if one.ok else "-",
                busy_text(one.busy),
            ]
        )
    headers = ["server", "scenario", "req/s", "rounds", "p50 ms", "p99 ms", "errors"]
    headers += ["of bare, same server", "of bare uvicorn", "server CPU us/req", "CPU 0/1 busy"]
    return markdown(headers, rows)


def slow_table(reports: list[tuple[str, SlowReport]]) -> str:
    rows = []
    for label, report in reports:
        closed = report.closed_after
        answered = len(report.normal_ms)
        failed = sum(report.normal_failures.values())
        rows.append(
            [
                label,
                f"{report.opened:,} of {report.asked:,}"
                + (f" ({counts(report.open_failures)})" if report.open_failures else ""),
                f"{answered} of {answered + failed}",
                counts(report.normal_failures),
                f"{statistics.median(report.normal_ms):.1f}" if report.normal_ms else "-",
                f"{percentile(report.normal_ms, 0.99):.1f}" if report.normal_ms else "-",
                f"{len(closed):,}",
                f"{closed[0]:.1f} s / {closed[-1]:.1f} s" if closed else "never",
                counts(report.answers_to_slow),
                str(len(report.log_lines)),
                "yes" if report.server_exit is None else f"no (exit {report.server_exit})",
            ]
        )
    headers = ["server / slow sockets", "slow sockets opened", "normal answered", "failed"]
    headers += ["p50 ms", "p99 ms", "slow closed by server", "first / last closed after"]
    headers += ["server's answer to slow", "log lines", "server alive"]
    return markdown(headers, rows)


def machine_facts(placement: Placement, fd_limit: int, facts: dict[str, str]) -> str:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    where = (
        "placement left to the OS"
        if placement.measured is None
        else f"servers on CPU {min(placement.measured)}, "
        f"load generator on CPU {min(placement.others or {0})}"
    )
    return "\n".join(
        [
            f"- CPUs: {os.cpu_count()} ({where})",
            *(f"- {label}: {fact}" for label, fact in facts.items()),
            "- "
            + ", ".join(f"{name} {version(name)}" for name in PACKAGES)
            + f"; Python {platform.python_version()}, {platform.system()} {platform.release()}",
            f"- open files: this process {fd_limit:,} (hard limit {hard:,})",
        ]
    )
