"""Seeded robustness runs, checked against the reference model; or a saved history checked again.

    python -m tests.robustness run --seeds 5 --duration 15 --out robustness-results/
    python -m tests.robustness check robustness-results/seed-3.jsonl

A run prints a line per seed and a Markdown table; a seed fails when it breaks a guarantee or when its
traffic went without a kind of fault (a SIGKILL, a dropped call, a reconnect, a cut stream: the kill that
ends every run does not count), and the run then exits 1. Every seed's history file is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from bench.postgres_schema import new_schema

from .history import History, missing_faults
from .model import violations
from .runner import run
from .traffic import RunConfig


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.robustness", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    runs = commands.add_parser("run", help="seeded runs with faults, each checked")
    runs.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default: %(default)s)")
    runs.add_argument("--first-seed", type=int, default=0)
    runs.add_argument("--duration", type=float, default=15.0, help="seconds of traffic per seed")
    runs.add_argument("--out", type=Path, default=Path("robustness-results"), help="where histories are kept")
    runs.add_argument("--replicas", type=int, default=1, help="servers sharing the --db PostgreSQL database")
    runs.add_argument("--db", default=None, help="a PostgreSQL URL to run on, one empty schema per seed made "
                      "with ?search_path= (default: a SQLite file per seed)")  # fmt: skip
    check = commands.add_parser("check", help="check a saved history again")
    check.add_argument("history", type=Path)
    args = parser.parse_args()
    if args.command == "check":
        history = History.read(args.history)
        found = violations(history) + missing_faults(history)
        print("\n".join(found) or "no violations")
        return 1 if found else 0
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    return asyncio.run(run_seeds(seeds, args.duration, args.out, args.db, args.replicas))


async def run_seeds(seeds: range, duration: float, out: Path, database: str | None = None, replicas: int = 1) -> int:
    out.mkdir(parents=True, exist_ok=True)
    rows, failed = [], False
    for seed in seeds:
        began = time.monotonic()
        with tempfile.TemporaryDirectory() as workdir:
            url = await new_schema(database, f"robust_{seed}_{int(time.time())}") if database else None
            config = RunConfig(seed, duration, database=url, replicas=replicas)
            history, counts = await run(config, Path(workdir))
        found, missing = violations(history), missing_faults(history)
        path = out / f"seed-{seed}.jsonl"
        history.write(path)
        failed = failed or bool(found or missing)
        rows.append((seed, counts, len(found), time.monotonic() - began))
        print(f"seed {seed}: {summary(counts)}: {len(found)} violations ({time.monotonic() - began:.0f} s; {path})",
              file=sys.stderr, flush=True)  # fmt: skip
        for line in [*missing, *found[:20]]:
            print(f"  {line}", file=sys.stderr)
    print("| seed | " + " | ".join(heading for heading, _ in COLUMNS) + " | violations |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for seed, c, n, _ in rows:
        print(f"| {seed} | " + " | ".join(f"{c[key]:,}" for _, key in COLUMNS) + f" | {n} |")
    return 1 if failed else 0


COLUMNS = [
    ("requests", "requests"), ("acknowledged writes", "acknowledged_writes"), ("through sessions", "session_writes"),
    ("revisions", "revisions"), ("SIGKILL + restart", "sigkill"), ("dropped calls", "dropped_call"),
    ("reconnects", "reconnect"), ("streams cut", "stream_cut"), ("slow watcher cut", "slow_watcher_cut"),
    ("sessions cut", "session_cut"), ("sent again", "resubmitted"), ("duplicates", "duplicates"),
]  # fmt: skip
"""The table's columns: heading, and the count (runner.counted) it shows."""


def summary(counts: dict[str, int]) -> str:
    return (
        f"{counts['requests']} requests, {counts['acknowledged_writes']} acknowledged writes "
        f"({counts['session_writes']} through sessions), {counts['sigkill']} SIGKILLs, {counts['dropped_call']} "
        f"dropped calls, {counts['reconnect']} reconnects, {counts['stream_cut'] + counts['slow_watcher_cut']} "
        f"streams cut, {counts['session_cut']} sessions cut ({counts['resubmitted']} submits sent again, "
        f"{counts['duplicates']} answered as duplicates)"
    )


if __name__ == "__main__":
    sys.exit(main())
