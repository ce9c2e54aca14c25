"""Merges as an execution's history grows: every policy on members of one map, beside top-level keys.

    python bench/merge_scaling.py            # 1K, 10K and 100K revisions; 60 s runs (about 45 minutes)
    python bench/merge_scaling.py --quick    # 1K and 10K; 20 s runs, for a smoke run

One `skillstate serve` process (SQLite), driven through the Python SDK from this one. Four tables, each case
beside its control measured in the same run, rounds of the two interleaved:
- lag: for each policy, one client writing members of one map (8 in flight, base = newest revision it saw
  minus the lag), at 1K, 10K and 100K revisions of history: "cold" members (10,000 written in turn, as the
  README's inventory: none written since the base) and "hot" ones (64 in turn: each write meets writes of
  its own member since its base, so the policy merges), new ones for each case (so that what an append or
  text member holds, which each write sends whole, is as long at 100K as at 1K). The control is the same on
  top-level keys. The history itself is written by the same client, at head, to 10,000 other members.
- writers: 64 writers at once, each writing members of its own of one map, base = the newest revision it
  saw, for 60 s in slices of 5 s, each slice followed by one of 64 writers on top-level keys of another
  execution: the rate of each in the map's first and last 10 s, and their ratio in each (two slices side by
  side see nearly the same machine, so the ratio moves with what the map's history costs).
- counter: one counter written from base 0 after 10K revisions, beside the same counter written at head.
- memory: one execution (in this process) after 100K revisions on a 10K-member lww map, before and after a
  compaction, beside the state alone.
The machine drifts by up to 2x between the start of a run and its end, so every history of a policy is
written first, each in an execution of its own, and each round of a lag case then runs on every history and
on the control in turn: the rate at 100K over the rate at 1K is the median of the rounds' own ratios.
Targets (issue 37): the rate at 100K >= 0.8x the rate at 1K for every policy and lag; 64 writers on a map
>= 0.8x those on top-level keys, and their last 10 s >= 0.9x their first; base 0 >= 0.8x head. Writes a PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillstate.clients import RetryPolicy, SkillstateError, StateClient

sys.path.insert(0, str(Path(__file__).parent))
from state_server import spawn

POLICIES = ("lww", "counter", "set", "max", "append", "text")
LAGS = (0, 64, 1024)
COLD, HOT = 10_000, 64
IN_FLIGHT = 8
ROUNDS = 5
SLICE = 5.0
"""Seconds of each slice of the 64 writers' run, on the map and on the keys in turn."""
PARTS = ["lag", "writers", "counter", "memory"]


def schema(policy: str, nested: bool) -> dict[str, Any]:
    """The policy on the members of map `m`, or (the control) on top-level keys."""
    members = {"additionalProperties": {"x-merge": policy}}
    return {"type": "object", "properties": {"m": members}} if nested else {"type": "object", **members}


def next_value(policy: str, n: int, before: Any) -> Any:
    """What a writer that read `before` writes under each policy (append and text extend what they read)."""
    if policy == "counter":
        return (before or 0) + 1
    if policy == "set":
        return sorted({n % 7, 10 + n % 5})
    if policy == "append":
        return [*(before or []), n]
    if policy == "text":
        return f"{before or ''}{n}\n"
    return f"v{n}" if policy == "lww" else n


@dataclass
class Writes:
    """One execution and what its client knows of it: the newest revision, and each member's values by
    revision (from the effective changes of its own writes: the client makes every write)."""

    client: StateClient
    execution: str
    policy: str
    nested: bool
    newest: int = 0
    values: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    refused: int = 0
    sequence: int = 0
    turns: collections.Counter[str] = field(default_factory=collections.Counter)
    """How many writes each group of members (by prefix) has had: its members are written in turn."""

    def patch(self, member: str, value: Any) -> dict[str, Any]:
        return {"m": {member: value}} if self.nested else {member: value}

    def value_at(self, member: str, revision: int) -> Any:
        known = self.values.get(member, [])
        index = bisect.bisect_right(known, revision, key=lambda item: item[0])
        return known[index - 1][1] if index else None

    async def write(self, member: str, lag: int, agent: str) -> None:
        base = max(0, self.newest - lag)
        n = self.sequence = self.sequence + 1
        value = next_value(self.policy, n, self.value_at(member, base))
        try:
            result = await self.client.submit_patch(self.execution, self.patch(member, value), agent_id=agent,
                                                    base_revision=base)  # fmt: skip
        except SkillstateError:
            self.refused += 1
            return
        self.newest = max(self.newest, result.revision)
        applied = result.applied_patch.get("m", {}) if self.nested else result.applied_patch
        if member in applied:
            known = self.values.setdefault(member, [])
            bisect.insort(known, (result.revision, applied[member]), key=lambda item: item[0])
            del known[:-64]

    async def run(self, count: int, lag: int, members: int, prefix: str, in_flight: int = IN_FLIGHT) -> float:
        """`count` writes, `in_flight` at a time, to `members` members written in turn; returns writes/s."""
        numbers = iter(range(count))

        async def worker(index: int) -> None:
            for _ in numbers:
                turn = self.turns[prefix] = self.turns[prefix] + 1
                await self.write(f"{prefix}{turn % members}", lag, f"agent-{index}")

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(in_flight)))
        return count / (time.perf_counter() - started)


async def open_writes(client: StateClient, policy: str, nested: bool) -> Writes:
    created = await client.create_execution(schema=schema(policy, nested), initial_state={"m": {}} if nested else {})
    return Writes(client, created.execution_id, policy, nested)


async def lag_table(client: StateClient, histories: list[int], commits: int) -> list[dict[str, Any]]:
    rows = []
    for policy in POLICIES:
        maps = {history: await open_writes(client, policy, True) for history in histories}
        keys = await open_writes(client, policy, False)
        grown = [*maps.items(), (histories[-1], keys)]
        for history, writes in grown:
            await writes.run(history, 0, COLD, "c", in_flight=64)  # at head, 64 in flight, to other members
            where = " on top-level keys" if writes is keys else ""
            print(f"  {policy}: {history:,} revisions written{where}", file=sys.stderr)
        for lag in LAGS:  # members of each case's own, so that what append and text members hold stays short
            for shape, members, prefix in (("cold", COLD, f"c{lag}-"), ("hot", HOT, f"h{lag}-")):
                rates: dict[int | str, list[float]] = collections.defaultdict(list)
                for _ in range(ROUNDS):  # every history, and the control, in each round: drift cancels
                    for history, writes in maps.items():
                        rates[history].append(await writes.run(commits, lag, members, prefix))
                    rates["keys"].append(await keys.run(commits, lag, members, prefix))
                first, last = rates[histories[0]], rates[histories[-1]]
                row = {
                    "policy": policy, "lag": lag, "shape": shape,
                    "map": {history: statistics.median(rates[history]) for history in histories},
                    "keys": statistics.median(rates["keys"]),
                    "flat": statistics.median(b / a for a, b in zip(first, last, strict=True)),
                    "to_keys": statistics.median(m / k for m, k in zip(last, rates["keys"], strict=True)),
                }  # fmt: skip
                rows.append(row)
                print(f"  {policy}, lag {lag}, {shape}: {row['flat']:.2f} of the rate at {histories[0]:,} "
                      f"after {histories[-1]:,} revisions ({row['map'][histories[-1]]:,.0f}/s), "
                      f"{row['to_keys']:.2f} of top-level keys", file=sys.stderr)  # fmt: skip
        refused = sum(w.refused for w in [*maps.values(), keys])
        if refused:
            print(f"  {policy}: {refused} writes refused (a base value the client did not know yet)", file=sys.stderr)
    return rows


async def writers_slice(writes: Writes, seconds: float, writers: int = 64) -> float:
    """`writers` writers for `seconds`, each writing members of its own in turn (COLD of them in all, so that
    what append and text members hold stays short) at the newest revision it saw; commits/s."""
    own, count = COLD // writers, 0
    started = time.perf_counter()

    async def writer(index: int) -> None:
        nonlocal count
        while time.perf_counter() - started < seconds:
            turn = writes.turns[f"w{index}"] = writes.turns[f"w{index}"] + 1
            await writes.write(f"w{index}-{turn % own}", 0, f"agent-{index}")
            count += 1

    await asyncio.gather(*(writer(i) for i in range(writers)))
    return count / (time.perf_counter() - started)


async def writers_table(client: StateClient, seconds: float) -> list[dict[str, Any]]:
    """For each policy, 64 writers on one map for `seconds` in slices of SLICE seconds, each followed by a
    slice of 64 writers on top-level keys of another execution: the machine drifts less between two slices
    side by side than over a run, so each 10 s of the map's writing is measured beside the keys' next to it."""
    rows = []
    for policy in POLICIES:
        on_map, on_keys = await open_writes(client, policy, True), await open_writes(client, policy, False)
        slices: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(int(seconds // SLICE)):
            for writes in (on_map, on_keys):
                slices[writes.nested].append(await writers_slice(writes, SLICE))
        per_window = int(10 // SLICE)
        windows, key_windows = (
            [statistics.mean(rates[i : i + per_window]) for i in range(0, len(rates), per_window)]
            for rates in (slices[True], slices[False])
        )
        rows.append({"policy": policy, "windows": windows, "key_windows": key_windows,
                     "keys": statistics.mean(slices[False])})  # fmt: skip
        print(f"  64 writers, {policy}: {windows[0]:,.0f}/s first 10 s, {windows[-1]:,.0f}/s last; on keys beside "
              f"them {key_windows[0]:,.0f}/s, {key_windows[-1]:,.0f}/s", file=sys.stderr)  # fmt: skip
    return rows


async def counter_table(client: StateClient, history: int, commits: int) -> dict[str, Any]:
    writes = await open_writes(client, "counter", False)
    await writes.run(history, 0, COLD, "c", in_flight=64)
    rates: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(3):  # each round: from base 0 and at head, 8 and 64 in flight
        rates["base 0"].append(await writes.run(commits, 10**9, 1, "hits"))
        rates["head"].append(await writes.run(commits, 0, 1, "hits"))
        rates["base 0, 64 in flight"].append(await writes.run(commits, 10**9, 1, "hits", in_flight=64))
        rates["head, 64 in flight"].append(await writes.run(commits, 0, 1, "hits", in_flight=64))
    print(f"  counter: {rates}", file=sys.stderr)
    return {"history": history, **{k: statistics.mean(v) for k, v in rates.items()}, "rounds": rates}


async def memory_table(revisions: int, members: int) -> dict[str, float]:
    """MiB one execution holds after `revisions` writes to members of an lww map, before and after a
    compaction, beside the state alone (in this process, on SQLite: tracemalloc does not see its page cache)."""
    from skillstate.server.engine.config import EngineConfig
    from skillstate.server.engine.state_engine import StateEngine
    from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

    folder = tempfile.TemporaryDirectory()
    tracemalloc.start()
    mark = tracemalloc.get_traced_memory()[0]
    engine = StateEngine(SqliteRevisionLog(Path(folder.name) / "memory.db"), EngineConfig(snapshot_every=1000))
    await engine.start()
    await engine.create_execution("x", json.dumps(schema("lww", True)), json.dumps({"m": {}}))
    log_bytes = 0
    for n in range(revisions):
        patch = json.dumps({"m": {f"k{n % members}": f"v{n}"}})
        await engine.submit_patch("x", f"agent-{n % 8}", n, patch)
        log_bytes += len(patch)
    held = tracemalloc.get_traced_memory()[0] - mark
    await engine.compact("x", revisions)
    after = tracemalloc.get_traced_memory()[0] - mark
    state_json = (await engine.get_state("x")).state_json
    before_state = tracemalloc.get_traced_memory()[0]
    state = json.loads(state_json)
    alone = tracemalloc.get_traced_memory()[0] - before_state
    tracemalloc.stop()
    del state
    await engine.close()
    folder.cleanup()
    return {"held": held / 2**20, "compacted": after / 2**20, "state": alone / 2**20, "log": log_bytes / 2**20}


def lag_report(lag: list[dict[str, Any]]) -> list[str]:
    histories = sorted(lag[0]["map"])
    first, last = histories[0], histories[-1]
    lines = [f"### Lag (commits/s, {IN_FLIGHT} in flight, through the SDK; medians of {ROUNDS} rounds, each round "
             "on every history and the control in turn)", ""]  # fmt: skip
    at = " | ".join(f"map at {h:,}" for h in histories)
    lines.append(
        f"| policy | lag | members | {at} | {last:,} / {first:,} | keys at {last:,} | map / keys at {last:,} |"
    )
    lines.append("|---|---|---|" + "---|" * (len(histories) + 3))
    for row in lag:
        rates = " | ".join(f"{row['map'][h]:,.0f}" for h in histories)
        lines.append(f"| {row['policy']} | {row['lag']} | {row['shape']} | {rates} | **{row['flat']:.2f}** "
                     f"| {row['keys']:,.0f} | {row['to_keys']:.2f} |")  # fmt: skip
    worst = min(row["flat"] for row in lag)
    return [*lines, "", f"Worst {last:,} / {first:,}: {worst:.2f} (target >= 0.8); the ratios are medians of the "
            "rounds' own ratios.", ""]  # fmt: skip


def writers_report(writers: list[dict[str, Any]]) -> list[str]:
    seconds = 10 * len(writers[0]["windows"])
    lines = [f"### 64 writers on one map for {seconds} s, in slices of {SLICE:.0f} s between slices on top-level keys "
             "(commits/s)", "",
             "| policy | map, first 10 s | map, last 10 s | last / first | keys, first / last 10 s "
             "| map / keys, first 10 s | map / keys, last 10 s | their last / first | map / keys, whole run |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in writers:
        windows, keys = row["windows"], row["key_windows"]
        first, last = windows[0] / keys[0], windows[-1] / keys[-1]
        lines.append(f"| {row['policy']} | {windows[0]:,.0f} | {windows[-1]:,.0f} | {windows[-1] / windows[0]:.2f} "
                     f"| {keys[0]:,.0f} / {keys[-1]:,.0f} | {first:.2f} | {last:.2f} | **{last / first:.2f}** "
                     f"| **{statistics.mean(windows) / row['keys']:.2f}** |")  # fmt: skip
    return [*lines, ""]


def counter_report(counter: dict[str, Any]) -> list[str]:
    stale, fresh = counter["rounds"]["base 0, 64 in flight"], counter["rounds"]["head, 64 in flight"]
    by_round = ", ".join(f"{b:,.0f} ({b / h:.2f})" for b, h in zip(stale, fresh, strict=True))
    return [f"### One counter after {counter['history']:,} revisions (commits/s)", "",
            "| base 0, 8 in flight | at head, 8 in flight | base 0 / head | base 0, 64 in flight, by round "
            "(of the same round at head) |", "|---|---|---|---|",
            f"| {counter['base 0']:,.0f} | {counter['head']:,.0f} | **{counter['base 0'] / counter['head']:.2f}** "
            f"| {by_round} |", ""]  # fmt: skip


def memory_report(memory: dict[str, float], revisions: int) -> list[str]:
    return [f"### Memory of one execution (MiB, tracemalloc), {revisions:,} revisions on a 10K-member lww map", "",
            "| held | after a compaction | the state alone | the patches' JSON |", "|---|---|---|---|",
            f"| {memory['held']:.1f} | {memory['compacted']:.1f} | {memory['state']:.1f} "
            f"| {memory['log']:.1f} |", ""]  # fmt: skip


def plot(lag: list[dict[str, Any]], writers: list[dict[str, Any]], path: Path) -> None:
    """Left: commits/s against revisions of history (lag 64, hot members). Right, if measured: the 64 writers'
    rates per 10 s of the map's writing, beside the keys' slices next to them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2 if writers else 1, figsize=(12 if writers else 6.5, 4.5), squeeze=False)
    by_history, over_time = axes[0][0], axes[0][-1]
    for row in (r for r in lag if (r["lag"], r["shape"]) == (64, "hot")):
        histories = sorted(row["map"])
        line = by_history.plot(histories, [row["map"][h] for h in histories], marker="o", label=f"{row['policy']}, map")
        by_history.plot([histories[-1]], [row["keys"]], marker="x", color=line[0].get_color())
    by_history.set(xscale="log", xlabel="revisions of history", ylabel="commits/s",
                   title="lag 64, hot members (x: top-level keys)", ylim=(0, None))  # fmt: skip
    by_history.legend(fontsize=8)
    for row in writers:
        seconds = [10 * (i + 1) for i in range(len(row["windows"]))]
        line = over_time.plot(seconds, row["windows"], marker=".", label=row["policy"])
        over_time.plot(seconds, row["key_windows"], linestyle=":", color=line[0].get_color())
    if writers:
        over_time.set(xlabel="seconds of the map's writing", ylabel="commits/s per 10 s", ylim=(0, None),
                      title="64 writers on one map (dotted: on top-level keys, beside)")  # fmt: skip
        over_time.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=PARTS, help="which tables to measure")
    parser.add_argument("--plot", type=Path, default=Path("docs/merge_scaling.png"))
    args = parser.parse_args()
    quick = ([1_000, 10_000], 600, 20.0)
    histories, commits, seconds = quick if args.quick else ([1_000, 10_000, 100_000], 1_500, 60.0)
    lag: list[dict[str, Any]] = []
    writers: list[dict[str, Any]] = []
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        cli = [sys.executable, "-m", "skillstate.cli", "serve", "--db", str(Path(tmp) / "bench.db")]
        server, address, _ = await spawn(*cli, "--listen", "127.0.0.1:0", "--log-level", "WARNING")
        try:
            async with StateClient(address, retry=RetryPolicy(attempts=1)) as client:
                if "lag" in args.parts:
                    print("lag, as history grows...", file=sys.stderr)
                    lag = await lag_table(client, histories, commits)
                    lines += lag_report(lag)
                if "writers" in args.parts:
                    print("64 writers at once...", file=sys.stderr)
                    writers = await writers_table(client, seconds)
                    lines += writers_report(writers)
                if "counter" in args.parts:
                    print("one counter from base 0...", file=sys.stderr)
                    lines += counter_report(await counter_table(client, 10_000, commits))
        finally:
            server.kill()
            await server.wait()
    if "memory" in args.parts:
        print("memory...", file=sys.stderr)
        lines += memory_report(await memory_table(histories[-1], 10_000), histories[-1])
    print("\n".join(lines))
    if lag:
        plot(lag, writers, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    asyncio.run(main())
