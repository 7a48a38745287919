"""Benchmark: one benchmark of this tree beside the same benchmark of another commit, in one run.

    .venv/bin/python -m bench.compare --base 39e0675 --rounds 2 -- pipeline --databases postgresql
    .venv/bin/python -m bench.compare --base 39e0675 -- api --database postgresql

The commit named by `--base` is unpacked into a temporary directory (`git archive`), and the
benchmark module (bench/<module>.py, the arguments after `--`) runs from each tree in turn,
`--rounds` times each, base first: each tree runs its own code, its own `tucano` (through
PYTHONPATH, in this .venv, so both use the same libraries) and its own ceiling, so each result
is a ratio against a ceiling measured in the same run. The table gives, per row of the
benchmark's own table, the median ratio of each tree and the change.

Rows are read from the benchmark's table: the first column that says `of bare` or
`of ceiling`, in the table whose header names it, sectioned by the line before it when that
line names a database (`sqlite: ...`).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATIO_LABELS = ("of bare", "of ceiling")
SECTION = re.compile(r"^\s*(sqlite|postgresql)\b", re.IGNORECASE)


def unpack(commit: str, into: Path) -> Path:
    """The tree of `commit`, unpacked into `into` (a directory of its own)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_benchmark(tree: Path, module: str, arguments: list[str]) -> str:
    """The output of `python -m bench.<module> <arguments>` run from `tree`."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree}"}
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *arguments],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    # 1: a benchmark that reports a target it missed, with its table.
    if done.returncode not in (0, 1) or not ratios(done.stdout):
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"bench.{module} failed in {tree} (exit {done.returncode})")
    return done.stdout


def ratios(output: str) -> dict[str, float]:
    """Each row's ratio (a share of the ceiling, 0.42 or 42%) in a benchmark's tables, by
    `section: row name`."""
    found: dict[str, float] = {}
    lines = output.splitlines()
    section = ""
    for index, line in enumerate(lines):
        match = SECTION.match(line)
        if match:
            section = match.group(1).lower()
        label = next((label for label in RATIO_LABELS if label in line), None)
        if label is None or index + 1 >= len(lines) or not set(lines[index + 1]) <= {"-"}:
            continue
        ratio_end = line.index(label) + len(label)
        second_label = re.search(r"\S+", line[len(line.split()[0]) :])
        assert second_label is not None
        second_end = len(line.split()[0]) + second_label.end()
        for row in lines[index + 2 :]:
            if not row.strip():
                break
            value = row[:second_end].split()[-1]
            name = row[: second_end - len(value)].strip()
            share = row[:ratio_end].split()[-1]
            try:
                found[f"{section}: {name}" if section else name] = (
                    float(share.rstrip("%")) / 100 if share.endswith("%") else float(share)
                )
            except ValueError:
                continue  # a row without a ratio (a ceiling's own, a paced run)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each tree")
    parser.add_argument("module", help="the benchmark: api, pipeline, deliveries, ...")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the benchmark's own")
    args = parser.parse_args()
    arguments = [a for a in args.arguments if a != "--"]
    results: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
    with tempfile.TemporaryDirectory(prefix="tucano_compare_") as tmp:
        trees = {"base": unpack(args.base, Path(tmp)), "head": ROOT}
        for round_number in range(1, args.rounds + 1):
            for name, tree in trees.items():
                print(f"round {round_number}: {name} ({tree})", file=sys.stderr, flush=True)
                output = run_benchmark(tree, args.module, arguments)
                print(output, file=sys.stderr, flush=True)
                for row, share in ratios(output).items():
                    results[name].setdefault(row, []).append(share)
    rows = [row for row in results["head"] if row in results["base"]]
    width = max([len(row) for row in rows] + [10])
    print(
        f"\nbench.{args.module} {' '.join(arguments)}: medians of {args.rounds} run(s) of each "
        f"tree, as shares of the ceiling measured in the same run; base {args.base}, head this "
        "tree\n"
    )
    print(f"{'row':<{width}} {'base':>7} {'head':>7} {'change':>8}")
    print("-" * (width + 25))
    for row in rows:
        base = statistics.median(results["base"][row])
        head = statistics.median(results["head"][row])
        change = f"{(head - base) / base:+.1%}" if base else "-"
        print(f"{row:<{width}} {base:>7.3f} {head:>7.3f} {change:>8}")


if __name__ == "__main__":
    main()
