"""Token scaling of the warehouse runtimes: three agents through a real server, every runtime, the scripted
test policy, at T = 10, 25, 50, 100 and 200 events.

    python bench/token_scaling.py                 # every horizon, then the noise levels (about two minutes)
    python bench/token_scaling.py --horizons 10 50 --noise-levels
    python bench/token_scaling.py --model gpt-4o-mini --horizons 100 --seeds 0 --noise-levels   # a real model

Prints a Markdown table (score, average and largest prompt, total tokens, and each total against the
shared-state agents' in the same run), how flat each shared-state agent's prompt stays (its largest prompt
against its median), and writes a PNG of cumulative tokens per step at the longest horizon. Then the
paper's noise experiment (Appendix C): the same run at T=50 with 0, 5, 20 and 50 irrelevant telemetry lines
in every observation, and the T=100 check over 8 seeds. The scores are
those of a scripted TEST POLICY, not of a model: they show the runtimes work; the token counts are real.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("SKILLSTATE_OFFLINE", "1")

from skillstate.agents.reports.results import notes, plot, table
from skillstate.agents.runtime.contexts import RUNTIMES
from skillstate.agents.scripted.policy import SCRIPTED
from skillstate.agents.sims.sequential import SimConfig, SimResult, run_simulation
from skillstate.cli.sim import local_server


def flatness(result: SimResult) -> dict[str, float]:
    """Per agent: its largest prompt over its median prompt."""
    sizes: dict[str, list[int]] = defaultdict(list)
    for record in result.records:
        if record.outcome != "gave_up":
            sizes[record.agent].append(record.prompt_tokens)
    return {agent: max(s) / statistics.median(s) for agent, s in sorted(sizes.items())}


async def measure(horizons: list[int], seed: int, model: str, noise: int = 0) -> list[SimResult]:
    results: list[SimResult] = []
    async with local_server() as address:
        for horizon in horizons:
            ours: SimResult | None = None
            for runtime in RUNTIMES:
                config = SimConfig(horizon=horizon, runtime=runtime, seed=seed, noise=noise, model=model)
                if (
                    runtime in ("truncated", "summary") and ours is not None
                ):  # the window is the shared-state prompt budget
                    config = replace(config, window_tokens=max(ours.prompt_sizes))
                result = await run_simulation(address, config)
                ours = result if runtime == "skillstate" else ours
                results.append(result)
                print(f"T={horizon:>3} noise {noise:>2} {runtime:>10}: score {result.score:.2f}, "
                      f"{result.total_tokens:,} tokens", file=sys.stderr, flush=True)  # fmt: skip
    return results


async def over_seeds(seeds: int, model: str) -> list[tuple[int, float, float]]:
    rows = []
    async with local_server() as address:
        for seed in range(seeds):
            ours = await run_simulation(address, SimConfig(horizon=100, seed=seed, model=model))
            chat = await run_simulation(address, SimConfig(horizon=100, seed=seed, model=model, runtime="groupchat"))
            rows.append((seed, max(flatness(ours).values()), chat.total_tokens / ours.total_tokens))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizons", type=int, nargs="*", default=[10, 25, 50, 100, 200])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=SCRIPTED, help="any litellm model string (default: the test policy)")
    parser.add_argument("--noise-levels", type=int, nargs="*", default=[0, 5, 20, 50])
    parser.add_argument("--noise-horizon", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=8, help="seeds of the T=100 shared-state vs group chat check")
    parser.add_argument("--plot", type=Path, default=Path("docs/token_scaling.png"))
    args = parser.parse_args()
    results = asyncio.run(measure(args.horizons, args.seed, args.model))
    print(table(results))
    print()
    print("| horizon | shared-state agent | largest prompt / median |")
    print("|---|---|---|")
    for result in results:
        if result.config.runtime == "skillstate":
            for agent, ratio in flatness(result).items():
                print(f"| {result.config.horizon} | {agent} | {ratio:.2f} |")
    by = {(r.config.horizon, r.config.runtime): r for r in results}
    for horizon in args.horizons:
        ours, chat = by[(horizon, "skillstate")], by[(horizon, "groupchat")]
        print(f"\nT={horizon}: group chat spends {chat.total_tokens / ours.total_tokens:.1f}x the tokens of the "
              "shared-state agents", end="")  # fmt: skip
    print("\n")
    print(notes(results))
    longest = max(args.horizons)
    plot([r for r in results if r.config.horizon == longest], args.plot)
    print(f"\nplot: {args.plot}")
    if args.seeds:
        print("\nT=100 over seeds: the least flat shared-state agent, and the group chat's tokens against "
              "the shared-state agents'\n")  # fmt: skip
        print("| seed | largest prompt / median (worst agent) | group chat / shared-state tokens |")
        print("|---|---|---|")
        for seed, worst, ratio in asyncio.run(over_seeds(args.seeds, args.model)):
            print(f"| {seed} | {worst:.2f} | {ratio:.1f}x |")
    if args.noise_levels:
        noisy = [
            r
            for level in args.noise_levels
            for r in asyncio.run(measure([args.noise_horizon], args.seed, args.model, level))
        ]
        print(f"\nNoise (T={args.noise_horizon}): telemetry lines per observation\n")
        print("| noise | runtime | score | avg prompt tokens | total tokens |")
        print("|---|---|---|---|---|")
        for r in noisy:
            print(f"| {r.config.noise} | {r.config.runtime} | {r.score:.2f} | {r.average_prompt_tokens:,.0f} "
                  f"| {r.total_tokens:,} |")  # fmt: skip


if __name__ == "__main__":
    main()
