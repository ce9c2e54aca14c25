"""Agents at once: the stockroom on its own clock, 1, 2, 4 and 8 agents per skill, events shared by claims in
the state and through each skill's consumer group, beside the transcript-sharing group chat on the same
events, in one run, against a server in a process of its own; then the merges as contention grows.

    python bench/coordination.py                      # the full run (about ten minutes)
    python bench/coordination.py --sizes 1 4 --horizon 60 --chat-sizes 4 --contentions 0 0.5

The event rate saturates one agent per skill: an agent's step takes about `think` ms, so one agent a skill
handles at most tick/think events a tick of its skill, and the rate asks for more. Prints a Markdown table
(on time, late, dropped, duplicate actions, state drift, conflicts and claim losses per event, tokens per
handled event, latency p50/p99 in ticks and ms), each target with its verdict, and writes a PNG. The
merge table gives, for each contention (the share of events paired with a second about the same item) and
team size, the concurrent writes the server merged per handled event, by policy, with the group chat on
the same events (it writes no state: nothing to merge). The scores are those of the scripted TEST POLICY:
they show the coordination works; the token counts are real.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("SKILLSTATE_OFFLINE", "1")

from skillstate.agents.envs.clock import Pace
from skillstate.agents.reports.team_results import label, notes, plot, policy_counts, table
from skillstate.agents.sims.concurrent import TeamResult, run_team
from skillstate.agents.sims.team_setup import TeamConfig


async def serve(folder: Path) -> tuple[asyncio.subprocess.Process, str]:
    """`skillstate serve` on a fresh SQLite file: the server gets a process (and a core) of its own."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skillstate.cli", "serve", "--listen", "127.0.0.1:0", "--db", str(folder / "bench.db"),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    match = re.search(r"serving on ([\d.]+:\d+)", line)
    if not match:
        raise RuntimeError(f"server did not start: {line!r}")
    return process, match.group(1)


async def measure(args: argparse.Namespace) -> list[TeamResult]:
    pace = Pace(args.tick_ms, args.rate, args.deadline)
    common = {"horizon": args.horizon, "pace": pace, "think_ms": args.think_ms, "seed": args.seed}
    configs = [
        TeamConfig(agents_per_skill=n, coordination=coordination, contention=args.contention, **common)  # type: ignore[arg-type]
        for coordination in ("claims", "groups")
        for n in args.sizes
    ]
    configs += [TeamConfig(agents_per_skill=n, runtime="groupchat", contention=args.contention, **common)  # type: ignore[arg-type]
                for n in args.chat_sizes]  # fmt: skip
    for contention in (c for c in args.contentions if c != args.contention):
        configs += [TeamConfig(agents_per_skill=n, contention=contention, **common) for n in args.sizes]  # type: ignore[arg-type]
        configs += [TeamConfig(agents_per_skill=n, runtime="groupchat", contention=contention, **common)  # type: ignore[arg-type]
                    for n in args.chat_sizes]  # fmt: skip
    results = []
    with tempfile.TemporaryDirectory(prefix="skillstate-bench-") as folder:
        process, address = await serve(Path(folder))
        try:
            for config in configs:
                result = await run_team(address, config)
                s = result.summary()
                print(f"{label(result):>20} x{config.agents_per_skill} at {config.contention:g}: "
                      f"{s['handled_on_time']}/{s['events']} on "
                      f"time, {s['tokens_per_handled_event']} tokens/event, {s['wall_seconds']} s",
                      file=sys.stderr, flush=True)  # fmt: skip
                results.append(result)
        finally:
            process.terminate()
            await process.wait()
    return results


def per_event_table(results: list[TeamResult]) -> str:
    lines = ["| runtime | agents per skill | conflicts / event | claim losses / event | latency p50 / p99, ms |",
             "|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(results, key=lambda r: (label(r), r.config.agents_per_skill)):
        s = r.summary()
        p50, p99 = s["latency_ms_p50"], s["latency_ms_p99"]
        latency = "" if p50 is None or p99 is None else f"{p50:,.0f} / {p99:,.0f}"
        lines.append(f"| {label(r)} | {s['agents_per_skill']} | {s['conflicts'] / s['events']:.2f} "
                     f"| {s['claim_losses'] / s['events']:.2f} | {latency} |")  # fmt: skip
    return "\n".join(lines)


def merges_table(results: list[TeamResult]) -> str:
    """Concurrent writes merged per handled event, by policy, as contention and agents per skill grow (claims)."""
    policies = ["lww", "counter", "set", "append", "text"]  # the stockroom's merging policies (POLICIES)
    columns = ["contention", "runtime", "agents per skill", "handled", *(f"{p} / event" for p in policies),
               "data conflicts", "state drift"]  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    chosen = [r for r in results if r.config.runtime == "groupchat" or r.config.coordination == "claims"]
    for r in sorted(chosen, key=lambda r: (r.config.contention, label(r), r.config.agents_per_skill)):
        s = r.summary()
        handled = s["handled_on_time"] + s["late"]
        shares = [f"{s['resolutions'].get(p, 0) / handled:.2f}" if handled and s["state_drift"] is not None else "n/a"
                  for p in policies]  # fmt: skip
        drift = "n/a" if s["state_drift"] is None else str(len(s["state_drift"]))
        lines.append(f"| {s['contention']:g} | {label(r)} | {s['agents_per_skill']} | {handled}/{s['events']} | "
                     + " | ".join(shares) + f" | {policy_counts(s, 'data_conflicts')} | {drift} |")  # fmt: skip
    return "\n".join(lines)


def verdicts(results: list[TeamResult]) -> list[str]:
    """Each target of the issue, with the figure measured and whether it was met."""
    main = [r for r in results if r.config.contention == results[0].config.contention]
    by = {(label(r), r.config.agents_per_skill): r.summary() for r in main}
    lines = []

    def say(target: str, met: bool, figure: str) -> None:
        lines.append(f"- {target}: {figure} ({'met' if met else 'MISSED'})")

    ours = [r.summary() for r in results if r.config.runtime == "skillstate"]
    say("duplicate actions 0 at every size and contention", all(s["duplicate_actions"] == 0 for s in ours),
        f"{sum(s['duplicate_actions'] for s in ours)} in all")  # fmt: skip
    say("state drift 0 with the honest policy, at every contention", all(s["state_drift"] == [] for s in ours),
        f"{sum(len(s['state_drift'] or []) for s in ours)} paths in all")  # fmt: skip
    for name in ("skillstate (claims)", "skillstate (groups)"):
        one, four = by.get((name, 1)), by.get((name, 4))
        if one is None or four is None:
            continue
        events = four["events"]
        say(f"{name}: 4 per skill handle >= 0.95 on time where 1 per skill falls behind",
            four["handled_on_time"] >= 0.95 * events and one["handled_on_time"] < 0.95 * events,
            f"{four['handled_on_time'] / events:.2f} with 4, {one['handled_on_time'] / events:.2f} with 1")  # fmt: skip
        ratio = four["tokens_per_handled_event"] / one["tokens_per_handled_event"]
        figure = f"{four['tokens_per_handled_event']:,.0f} / {one['tokens_per_handled_event']:,.0f} = {ratio:.2f}x"
        say(f"{name}: tokens per handled event with 4 per skill within 1.2x of 1 per skill", ratio <= 1.2, figure)
        chat = by.get(("groupchat", 4))
        if chat is not None and chat["tokens_per_handled_event"]:
            against = chat["tokens_per_handled_event"] / four["tokens_per_handled_event"]
            say(f"group chat >= 10x {name}'s tokens per handled event, 4 per skill, {events} events",
                against >= 10, f"{chat['tokens_per_handled_event']:,.0f} / {four['tokens_per_handled_event']:,.0f} "
                f"= {against:.1f}x")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8], help="agents per skill")
    parser.add_argument("--chat-sizes", type=int, nargs="*", default=[4], help="group chat agents per skill")
    parser.add_argument("--horizon", type=int, default=100, help="events")
    parser.add_argument("--rate", type=float, default=1.5, help="events per tick, on average")
    parser.add_argument("--tick-ms", type=float, default=100.0)
    parser.add_argument("--deadline", type=int, default=20, help="ticks")
    parser.add_argument("--think-ms", type=float, default=300.0, help="the test policy's time per call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--contention", type=float, default=0.2, help="of the team-size sweep")
    parser.add_argument(
        "--contentions",
        type=float,
        nargs="*",
        default=[0.0, 0.2, 0.5],
        help="of the merge sweep (claims, --sizes, and the group chat at --chat-sizes)",
    )
    parser.add_argument("--plot", type=Path, default=Path("docs/coordination.png"))
    args = parser.parse_args()
    results = asyncio.run(measure(args))
    sweep = [r for r in results if r.config.contention == args.contention]
    print(table(sweep))
    print()
    print(per_event_table(sweep))
    print()
    print(merges_table(results))
    print()
    print("\n".join(verdicts(results)))
    print()
    print(notes(sweep))
    plot(sweep, args.plot)
    print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
