"""`skillstate sim --agents-per-skill N ...`: agents working at once against a world on its own clock, beside
the group chat under the same load (skillstate.agents.sims.concurrent)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import UsageError
from .progress import RunProgress

if TYPE_CHECKING:
    from skillstate.agents.sims.concurrent import TeamResult
    from skillstate.agents.sims.team_setup import TeamConfig

COORDINATION_CHOICES = ("claims", "groups", "both")
DEMO = {"agents_per_skill": 3, "horizon": 40, "rate": 1.5, "tick_ms": 100.0, "deadline": 20, "think_ms": 150.0}
"""The demo's run of agents at once: three agents a skill, and the group chat taking turns on the same events."""


def add_arguments(sim: argparse.ArgumentParser) -> None:
    team = sim.add_argument_group("agents at once (with --agents-per-skill)")
    team.add_argument("--agents-per-skill", type=int, nargs="+", default=None, metavar="N",
                      help="run N agents per skill at once against a timed world (several values: one run each, "
                      "and a plot across them); exclusive with --agents")  # fmt: skip
    team.add_argument("--rate", type=float, default=1.5, help="events per tick, on average (default: %(default)s)")
    team.add_argument("--tick-ms", type=float, default=100.0, help="milliseconds per tick (default: %(default)s)")
    team.add_argument("--deadline", type=int, default=20, help="ticks an event may wait (default: %(default)s)")
    team.add_argument("--think-ms", type=float, default=300.0,
                      help="the test policy's time per model call (default: %(default)s)")  # fmt: skip
    team.add_argument("--lease", type=int, default=10, help="ticks a claim holds (default: %(default)s)")
    team.add_argument("--contention", type=float, default=0.2, metavar="P",
                      help="the share of events that come with a second about the same item, announced at "
                      "once (default: %(default)s)")  # fmt: skip
    team.add_argument("--coordination", choices=COORDINATION_CHOICES, default="claims",
                      help="share a skill's events by claims in the state only, or through its consumer group "
                      "too (both: a run of each; default: %(default)s)")  # fmt: skip
    team.add_argument("--faults", default="", metavar="LIST",
                      help="faulty agents to put in, comma-separated: stall, die, finish, corrupt, fumble")  # fmt: skip
    team.add_argument("--processes", action="store_true", help="each agent in an OS process of its own")
    team.add_argument("--run-timeout", type=float, default=600.0, metavar="SECONDS",
                      help="end the run after this long whatever is left (default: %(default)s)")  # fmt: skip


def configs(args: argparse.Namespace, runtimes: list[str], model: str) -> list[TeamConfig]:
    """One TeamConfig per (runtime, coordination, agents per skill) the command line asks for."""
    from skillstate.agents.envs.clock import Pace
    from skillstate.agents.sims.team_setup import TEAM_RUNTIMES, TeamConfig

    if args.agents != 3:
        raise UsageError("--agents and --agents-per-skill are exclusive")
    unknown = [r for r in runtimes if r not in TEAM_RUNTIMES]
    if unknown:
        choices = " or ".join(TEAM_RUNTIMES)
        raise UsageError(f"--runtime: {', '.join(unknown)} cannot run agents at once (use {choices})")
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    coordinations = ["claims", "groups"] if args.coordination == "both" else [args.coordination]
    try:
        pace = Pace(args.tick_ms, args.rate, args.deadline)
        common = {"horizon": args.horizon, "pace": pace, "think_ms": args.think_ms, "lease_ticks": args.lease,
                  "seed": args.seed, "model": model, "faults": faults, "timeout": args.run_timeout,
                  "processes": args.processes, "transport": args.transport, "rezip": args.rezip,
                  "contention": args.contention, "env": args.env}  # fmt: skip
        if args.recall is not None:
            common["recall"] = args.recall
        return [
            TeamConfig(agents_per_skill=n, runtime=runtime, coordination=coordination, **common)
            for runtime in runtimes
            for coordination in (coordinations if runtime == "skillstate" else ["claims"])
            for n in args.agents_per_skill
        ]
    except ValueError as error:
        raise UsageError(str(error)) from None


async def run(
    args: argparse.Namespace, runtimes: list[str], model: str, address: str, connection: dict[str, Any]
) -> int:
    """Run every configuration against `address`, then print and write the results."""
    return 0 if await run_configs(configs(args, runtimes, model), address, connection, args.out) else 1


async def demo(model: str, address: str, connection: dict[str, Any], out: Path, transport: str = "session") -> bool:
    """The demo's second part: SKILL.state agents at once beside the group chat, on a world with a clock;
    False when a run failed."""
    from skillstate.agents.envs.clock import Pace
    from skillstate.agents.sims.team_setup import TeamConfig

    pace = Pace(DEMO["tick_ms"], DEMO["rate"], int(DEMO["deadline"]))
    agents, horizon = int(DEMO["agents_per_skill"]), int(DEMO["horizon"])
    print(f"\nAgents at once: {agents} a skill, {horizon} events arriving on their own clock, beside the group "
          "chat taking turns on the same events\n")  # fmt: skip
    think = DEMO["think_ms"]
    runtimes = ("skillstate", "groupchat")
    configs = [TeamConfig(agents_per_skill=agents, horizon=horizon, runtime=r, pace=pace, think_ms=think, model=model,
                          transport=transport) for r in runtimes]  # fmt: skip
    return await run_configs(configs, address, connection, out)


async def run_configs(configs: list[TeamConfig], address: str, connection: dict[str, Any], out: Path) -> bool:
    """Run `configs` one after another, then print and write their results; False when a run failed (the
    others are kept)."""
    from skillstate.agents.reports.results import FailedRun
    from skillstate.agents.reports.team_results import notes, table, write
    from skillstate.agents.sims.concurrent import run_team

    results: list[TeamResult] = []
    failed: list[FailedRun] = []
    for config in configs:
        sharing = f"/{config.coordination}" if config.runtime == "skillstate" else ""
        name = f"{config.runtime}{sharing} x{config.agents_per_skill}"
        progress = RunProgress(f"{name:>24}", config.horizon)
        try:
            on_tick = _handled_by_tick(progress)
            results.append(await run_team(address, config, jsonl=out / "steps.jsonl", on_tick=on_tick, **connection))
        except Exception as error:  # a model, a key: that run failed; the others go on
            if getattr(error, "status", None) is not None:
                raise  # a server error: main maps its status to an exit code
            failed.append(FailedRun.of_team(config, error))
            print(f"skillstate sim: {failed[-1].line()}", file=sys.stderr)
        finally:
            progress.close()
        write(results, out, failed)  # kept current as runs end
    if not results:
        return False
    paths = write(results, out, failed)
    print(table(results))
    print()
    print(notes(results, failed))
    print(f"\nresults: {paths['json']}, {paths['table']}, plot: {paths['plot']}, steps: {out / 'steps.jsonl'}")
    return not failed


def _handled_by_tick(progress: RunProgress) -> Callable[[int, Any], None]:
    """A timed run's `on_tick`: the events handled so far, and the tick."""

    def on_tick(tick: int, record: Any) -> None:
        handled = sum(e.handled_tick is not None for e in record.events.values())
        progress.update(handled, max(progress.total, len(record.events)), tick=tick)

    return on_tick
