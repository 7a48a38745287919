"""Faults: a worker killed, PostgreSQL stopped under load, receivers that misbehave, and the
same on the queue on NATS JetStream; one table, exit status 1 on any loss or any expectation
not met.

    TUCANO_BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test_faults \\
        .venv/bin/python -m bench.faults                 # every case, several minutes
    .venv/bin/python -m bench.faults --case sigkill --database sqlite
    .venv/bin/python -m bench.faults --case nats-worker,nats-relay,nats-server,nats-hanging

Cases (real `tucano serve` / `tucano worker` processes on a fresh database, bench/deployment.py;
receivers in a process of their own, bench/fault_receivers.py):

- sigkill: `--deliveries` deliveries due (events published through the batch endpoint, 500 a
  request, fanned out to 4 webhooks), the process running the worker killed with SIGKILL once
  `--kill-at` of them arrived, and a new one started. On PostgreSQL that is `tucano worker`
  beside `tucano serve --no-worker`; on SQLite, `tucano serve` with its worker in the process.
  Run with TUCANO_DELIVERY_LEASE_SECONDS=10 (and a 5 s delivery timeout, as the lease must be
  twice it) so that the killed worker's claims come back within seconds. Every delivery must
  arrive (by webhook-id and receiver); duplicates are at-least-once delivery, reported only.
- outage: on a PostgreSQL cluster of its own (bench/throwaway_postgres.py, its own port),
  `--rate` API requests a second (payment-link create and read, event publish) while the cluster
  is stopped for `--down-seconds` (`pg_ctl stop -m fast`) and started again. While it is down
  every answer must be 503 with `Retry-After` and the error body, within 5 s; nothing else
  (500, no answer) at any time; each operation answers 200 again with no process restarted;
  every publish answered 202 is delivered.
- receivers: paced events to 2 healthy receivers for `--seconds`, then again with one webhook
  more on each misbehaving receiver (hangs, resets, answers a byte a second, answers 100 MB).
  The healthy deliveries' p99 beside them must stay within 500 ms of the run alone (a target
  held up behind a misbehaving one would wait a second or more), none lost, and the worker's
  RSS must not grow by 50 MiB (it keeps 1 KiB of an answer).

On the queue on NATS (TUCANO_QUEUE=nats; PostgreSQL and /usr/sbin/nats-server needed, the cases
are skipped with a line saying so without the latter), each on a fresh cluster of three and 2
`tucano worker` processes (bench/queue_faults.py, bench/queue_hanging.py):

- nats-worker: as sigkill, a worker that is not the relay's leader killed, a new one started,
  and a quarter of the events published after the kill. 0 lost; duplicates and the time until
  the last delivery arrived reported beside what the rest takes at the rate before the kill.
- nats-relay: the same, the process whose relay leads killed (the one named by the connection
  `tucano-relay <pid>` in pg_stat_activity); a new relay must lead within a minute (reported,
  with the time until the next arrival).
- nats-server: the server leading the deliveries' stream killed, the load going on, and started
  again `--down-seconds` later. 0 lost.
- nats-hanging: as receivers, with the hanging receiver only, beside 2 healthy ones: their p99
  within 500 ms of the run alone, none lost, and no worker process with more connections open to
  the hanging host than TUCANO_DELIVERY_CONCURRENCY_PER_TARGET (8 here).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Awaitable

from bench.deliveries import run
from bench.fault_cases import Outcome, bad_receivers, worker_sigkill
from bench.fault_outage import postgres_outage
from bench.queue_faults import nats_fault, nats_missing
from bench.queue_hanging import nats_hanging
from bench.served import postgres_url

CASES = (
    "sigkill",
    "outage",
    "receivers",
    "nats-worker",
    "nats-relay",
    "nats-server",
    "nats-hanging",
)
NATS_CASES = tuple(c for c in CASES if c.startswith("nats-"))


def table(outcomes: list[Outcome]) -> str:
    lines = [
        f"{'case':<20} {'database':<24} {'figure':<44} {'value':<40} {'expected':<30} result",
        "-" * 168,
    ]
    for outcome in outcomes:
        for index, figure in enumerate(outcome.figures):
            case, database = (outcome.case, outcome.database) if index == 0 else ("", "")
            result = {None: "", True: "PASS", False: "FAIL"}[figure.passed]
            lines.append(
                f"{case:<20} {database:<24} {figure.name:<44} {figure.value:<40}"
                f" {figure.expected:<30} {result}".rstrip()
            )
        lines.append("")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[Outcome]:
    databases = ["postgresql", "sqlite"] if args.database == "both" else [args.database]
    # The outage case runs on a cluster of its own: only the others need a server named, the
    # NATS ones whatever --database says (they run on PostgreSQL only).
    wanted = ("postgresql" in databases and bool({"sigkill", "receivers"} & set(args.case))) or (
        bool(set(NATS_CASES) & set(args.case))
    )
    pg_url = postgres_url() if wanted else None
    outcomes: list[Outcome] = []

    async def attempt(case: str, database: str, step: Awaitable[Outcome]) -> None:
        print(f"running {case} on {database} ...", file=sys.stderr, flush=True)
        try:
            outcomes.append(await step)
        except Exception:  # a case that breaks is a failure, the others still run
            traceback.print_exc()
            failed = Outcome(case, database)
            failed.expect("the case ran to its end", "no (see the traceback)", "yes", False)
            outcomes.append(failed)

    if "sigkill" in args.case:
        for database in databases:
            url = pg_url if database == "postgresql" else None
            await attempt(
                "worker SIGKILL",
                database,
                worker_sigkill(url, args.deliveries, 4, args.kill_at),
            )
    if "outage" in args.case:
        await attempt(
            "PostgreSQL outage",
            "postgresql (throwaway)",
            postgres_outage(args.down_seconds, args.rate),
        )
    if "receivers" in args.case:
        database = "postgresql" if pg_url else "sqlite"
        await attempt(
            "bad receivers", database, bad_receivers(pg_url, args.seconds, args.event_rate)
        )
    for case in (c for c in NATS_CASES if c in args.case):
        assert pg_url is not None
        missing = nats_missing()
        if missing:
            print(f"skipping {case}: {missing}", file=sys.stderr, flush=True)
            skipped = Outcome(case, "postgresql, NATS x3")
            skipped.report("skipped", missing)
            outcomes.append(skipped)
        elif case == "nats-hanging":
            await attempt(case, "NATS", nats_hanging(pg_url, args.seconds, args.event_rate))
        else:
            kind = case.removeprefix("nats-")
            step = nats_fault(kind, pg_url, args.deliveries, args.kill_at, args.down_seconds)
            await attempt(case, "NATS", step)
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--case", type=lambda s: s.split(","), default=list(CASES), help=",".join(CASES)
    )
    parser.add_argument("--database", choices=("both", "postgresql", "sqlite"), default="both")
    parser.add_argument(
        "--deliveries", type=int, default=10_000, help="sigkill, nats-*: deliveries due"
    )
    parser.add_argument("--kill-at", type=float, default=0.3, help="sigkill, nats-*: share arrived")
    parser.add_argument(
        "--down-seconds", type=float, default=10, help="outage, nats-server: seconds down"
    )
    parser.add_argument("--rate", type=float, default=60, help="outage: API requests a second")
    parser.add_argument(
        "--seconds", type=float, default=20, help="receivers, nats-hanging: each paced run"
    )
    parser.add_argument(
        "--event-rate", type=float, default=20, help="receivers, nats-hanging: events a second"
    )
    args = parser.parse_args()
    unknown = set(args.case) - set(CASES)
    if unknown:
        parser.error(f"unknown case {', '.join(sorted(unknown))}: pick from {', '.join(CASES)}")
    outcomes: list[Outcome] = []

    async def body() -> None:
        outcomes.extend(await main_async(args))

    run(body)
    print(f"\nFaults ({os.cpu_count()} CPUs shared by every process)\n")
    print(table(outcomes))
    passed = all(o.passed for o in outcomes)
    print("PASS" if passed else "FAIL")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
