"""The SKILL.state paper's Table 1 as it ran it: one agent (all three warehouse skills), every runtime, over
seeds and horizons, mean ± SD with paired t-tests against SKILL.state; then the ratio to Stateful (the
paper's 16.2x is against Stateful, one agent) as a curve over the length of the replies.

    python bench/paper_table1.py                            # 5 seeds, T = 50, 100, 200, then the curve
    python bench/paper_table1.py --seeds 2 --horizons 50 --reply-words 60 300

The ratio depends on how long replies are: every runtime resends its replies, and SKILL.state does not. The
test policy reasons in 30-90 words; the paper's transcripts imply several hundred tokens a turn. So the curve
sets the test policy's reply length (`--reply-words`, the same for every runtime) and marks the paper's
regime: that is a measurement, not tuning. The scores are those of the scripted TEST POLICY, not of a model;
the token counts are real (o200k_base). Writes the tables into docs/performance.md (between its
`paper-table-1` markers) and a plot into docs/paper_table1.png.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("SKILLSTATE_OFFLINE", "1")

from skillstate.agents.reports.seeds import markdown, table_rows
from skillstate.agents.runtime.contexts import RUNTIMES
from skillstate.agents.scripted.policy import SCRIPTED
from skillstate.agents.sims.sequential import SimConfig, SimResult, run_simulation
from skillstate.cli.sim import local_server

PAPER_REGIME = (200, 400)
"""Words a turn the paper's transcripts imply (several hundred tokens)."""
MARKERS = ("<!-- paper-table-1 -->", "<!-- /paper-table-1 -->")


async def table1(horizons: list[int], seeds: int, model: str) -> list[SimResult]:
    results: list[SimResult] = []
    async with local_server() as address:
        for horizon in horizons:
            for seed in range(seeds):
                ours: SimResult | None = None
                for runtime in RUNTIMES:
                    config = SimConfig(agents=1, horizon=horizon, runtime=runtime, seed=seed, model=model)
                    if runtime in ("truncated", "summary") and ours is not None:
                        config = replace(config, window_tokens=max(ours.prompt_sizes))  # the paper's budget
                    result = await run_simulation(address, config)
                    ours = result if runtime == "skillstate" else ours
                    results.append(result)
                    print(f"T={horizon} seed {seed} {runtime:>10}: score {result.score:.2f}, "
                          f"{result.total_tokens:,} tokens", file=sys.stderr, flush=True)  # fmt: skip
    return results


async def curve(words: list[int], horizon: int, model: str) -> list[tuple[int, SimResult, SimResult]]:
    """(reply words, skillstate, stateful) at one horizon, seed 0."""
    points = []
    async with local_server() as address:
        for count in words:
            runs = []
            for runtime in ("skillstate", "stateful"):
                config = SimConfig(agents=1, horizon=horizon, runtime=runtime, model=model, reply_words=count)
                runs.append(await run_simulation(address, config))
            points.append((count, runs[0], runs[1]))
            print(f"reply {count} words: stateful / skillstate = {runs[1].total_tokens / runs[0].total_tokens:.1f}x",
                  file=sys.stderr, flush=True)  # fmt: skip
    return points


def curve_table(points: list[tuple[int, SimResult, SimResult]]) -> str:
    lines = ["| reply words | skillstate total tokens | stateful total tokens | stateful / skillstate |",
             "|---|---|---|---|"]  # fmt: skip
    for words, ours, theirs in points:
        regime = " (the paper's regime)" if PAPER_REGIME[0] <= words <= PAPER_REGIME[1] else ""
        lines.append(f"| {words}{regime} | {ours.total_tokens:,} | {theirs.total_tokens:,} "
                     f"| {theirs.total_tokens / ours.total_tokens:.1f}x |")  # fmt: skip
    return "\n".join(lines)


def plot(rows: list[dict], points: list[tuple[int, SimResult, SimResult]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_horizon, by_words) = plt.subplots(1, 2, figsize=(12, 4.5))
    for runtime in RUNTIMES:
        mine = sorted((r for r in rows if r["runtime"] == runtime), key=lambda r: r["horizon"])
        means, spreads = [r["total_tokens_mean"] for r in mine], [r["total_tokens_sd"] for r in mine]
        by_horizon.errorbar([r["horizon"] for r in mine], means, yerr=spreads, marker="o", capsize=3, label=runtime)
    by_horizon.set_xlabel("horizon (events)")
    by_horizon.set_ylabel("total tokens, mean ± SD over seeds")
    by_horizon.set_yscale("log")
    by_horizon.legend(fontsize=8)
    by_words.plot([w for w, _, _ in points], [t.total_tokens / o.total_tokens for w, o, t in points], marker="o")
    by_words.axvspan(*PAPER_REGIME, alpha=0.15, label="the paper's regime")
    by_words.set_xlabel("words of reasoning a reply (test policy)")
    by_words.set_ylabel("Stateful / SKILL.state total tokens")
    by_words.legend(fontsize=8)
    figure.suptitle("warehouse, one agent, scripted test policy")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_into(doc: Path, text: str) -> None:
    """Replace what stands between the markers of `doc` with `text`."""
    content = doc.read_text(encoding="utf-8")
    start, end = content.index(MARKERS[0]) + len(MARKERS[0]), content.index(MARKERS[1])
    doc.write_text(f"{content[:start]}\n{text}\n{content[end:]}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizons", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--reply-words", type=int, nargs="*", default=[30, 100, 200, 300, 400, 600])
    parser.add_argument("--curve-horizon", type=int, default=100)
    parser.add_argument("--model", default=SCRIPTED)
    parser.add_argument("--doc", type=Path, default=Path("docs/performance.md"))
    parser.add_argument("--plot", type=Path, default=Path("docs/paper_table1.png"))
    args = parser.parse_args()
    rows = table_rows(asyncio.run(table1(args.horizons, args.seeds, args.model)))
    points = asyncio.run(curve(args.reply_words, args.curve_horizon, args.model)) if args.reply_words else []
    text = f"{markdown(rows)}\n\n{curve_table(points)}" if points else markdown(rows)
    print(text)
    plot(rows, points, args.plot)
    write_into(args.doc, text)
    print(f"\nplot: {args.plot}; tables written into {args.doc}")


if __name__ == "__main__":
    main()
