"""`skillstate sim` and `skillstate demo`: SkillExecBench-style runs through a real server.

Without `--server`, a server runs in this process on a temporary SQLite file. Without `--model`, agents use
the scripted test policy (no network, no model), and every result says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import team
from .common import UsageError, add_command
from .progress import RunProgress

if TYPE_CHECKING:
    from skillstate.agents.sims.sequential import SimConfig, SimResult

BASELINES = ("react", "memory", "stateful", "truncated", "summary", "groupchat")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = add_command(
        commands, "sim", help="run a simulation: agents, an environment and a runtime",
        example="skillstate sim warehouse --agents 3 --horizon 50 --runtime all\n"
        "skillstate sim warehouse --agents-per-skill 1 2 4 --rate 2",
    )  # fmt: skip
    sim.add_argument("env", choices=["warehouse", "repo"], help="the environment")
    sim.add_argument("--agents", type=int, default=3, help="3: one per skill; 1: one for all (default: %(default)s)")
    sim.add_argument("--horizon", type=int, nargs="+", default=[100],
                     help="events to handle; several values: a run at each (default: %(default)s)")  # fmt: skip
    sim.add_argument("--constrained", action="store_true",
                     help="ask every runtime's model for JSON-schema-constrained answers, where it supports them "
                     "(default: free answers, reasoning first, as the paper runs them)")  # fmt: skip
    sim.add_argument("--reply-words", type=int, default=None, metavar="N",
                     help="test policy only: words of reasoning in every answer (default: its own, 30-90)")  # fmt: skip
    sim.add_argument("--recall", type=float, default=None, metavar="P",
                     help="test policy only: the chance it recalls each fact that only a transcript or a summary "
                     "gives, at each step (default: 0.95; 1 replays transcripts perfectly)")  # fmt: skip
    sim.add_argument("--seeds", type=int, default=1, metavar="N",
                     help="run seeds --seed .. --seed+N-1 and report mean ± SD with paired t-tests against "
                     "skillstate (default: %(default)s)")  # fmt: skip
    sim.add_argument(
        "--runtime",
        action="append",
        metavar="NAME[,NAME...]",
        help=f"context management: {', '.join(['skillstate', *BASELINES])}, or all (skillstate and every "
        "baseline); repeatable, or comma-separated (default: skillstate)",
    )
    sim.add_argument(
        "--scenario",
        choices=[
            "force-push",
            "flaky-ci",
            "pr-closed",
            "secret-audit",
            "secret-barcode",
            "secret-move",
            "canceled-order",
        ],
        default=None,
        help="a state-recovery scenario, the world changed outside the agents' actions (repo: force-push, "
        "flaky-ci, pr-closed; warehouse: secret-audit, secret-barcode, secret-move, canceled-order)",
    )
    sim.add_argument("--rezip", action="store_true",
                     help="the agents feed ReZip: they may expand a macro their P shows in summary, and report each "
                     "run's outcome, which may revise the library's macros (with --agents-per-skill, each agent "
                     "over a P hydrated for it alone); skillstate runtime only, since the baselines must see the "
                     "same P (default: off)")  # fmt: skip
    _common(sim, out="sim-results")
    team.add_arguments(sim)

    demo = add_command(
        commands, "demo", help="the warehouse for 100 steps, skillstate beside the baselines: one agent, a team "
        "of three, then agents at once",
        example="skillstate demo\nskillstate demo --model gpt-4o-mini --out demo-gpt",
    )  # fmt: skip
    _common(demo, out="demo-results")


def _common(parser: argparse.ArgumentParser, out: str) -> None:
    parser.add_argument("--noise", type=int, default=0, help="telemetry lines per observation (default: 0)")
    parser.add_argument("--seed", type=int, default=0, help="the event generator's seed (default: 0)")
    parser.add_argument(
        "--model", default=None, help="a litellm model string (default: skillstate/scripted, the test policy)"
    )
    model = parser.add_argument_group("the model path (agents/runtime/llm.py)")
    model.add_argument("--api-base", default=None, metavar="URL",
                       help="an OpenAI-compatible server (vLLM, Ollama, LM Studio, llama.cpp) for --model, e.g. "
                       "--model openai/qwen2.5 --api-base http://127.0.0.1:8000/v1")  # fmt: skip
    model.add_argument("--api-key", default=None, help="the key for --api-base (default: litellm's usual variable)")
    model.add_argument("--max-concurrent-calls", type=int, default=None, metavar="N",
                       help="model calls in flight at once in each process (default: 16)")  # fmt: skip
    model.add_argument("--call-timeout", type=float, default=None, metavar="SECONDS",
                       help="seconds one attempt of a model call may take (default: 120)")  # fmt: skip
    parser.add_argument("--window-tokens", type=int, default=None,
                        help="the truncated and summary runtimes' prompt budget (default: the largest skillstate "
                        "prompt of the same run, else 2000)")  # fmt: skip
    parser.add_argument("--result-limit", type=int, default=None, metavar="CHARS",
                        help="cut action results to CHARS, telling the agent (default: never cut)")  # fmt: skip
    parser.add_argument("--transport", choices=["session", "unary"], default="session",
                        help="how every agent reaches the server: one session each, carrying its observations and "
                        "its writes, or unary calls and an observation stream (default: %(default)s)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path(out), help="where results go (default: %(default)s)")
    parser.add_argument("--server", default=None, help="host:port of a running server (default: one in-process)")
    parser.add_argument("--tokens", type=Path, default=None, metavar="FILE",
                        help='JSON {agent id: token, "environment": token} for a --server that requires '
                        "credentials (docs/security.md)")  # fmt: skip
    parser.add_argument("--tls-ca", default=None, metavar="PEM", help="connect to --server with TLS, trusting this CA")
    parser.set_defaults(connection_flags=("server", "tls_ca"))


DEMO_TABLES = (
    (1, "", "Table 1 as the paper ran it: one agent runs the three skills, in each runtime"),
    (3, "team", "A team: three single-skill agents (receiving, shipping, maintenance) on one execution"),
)
"""The demo's sequential tables: agents, where under --out, and the title each is printed under."""


async def run(args: argparse.Namespace) -> int:
    from skillstate.agents.scripted.policy import SCRIPTED

    model = args.model or SCRIPTED
    if model.startswith("skillstate/"):
        os.environ.setdefault("SKILLSTATE_OFFLINE", "1")
    set_model_path(args)
    tables: list[tuple[int, Path, str | None]]  # agents, where the results go, a title to print above them
    if args.command == "demo":
        env, horizons, runtimes, seeds = "warehouse", [100], ["skillstate", *BASELINES], 1
        tables = [(agents, args.out / folder, title) for agents, folder, title in DEMO_TABLES]
    else:
        env, horizons, seeds = args.env, list(dict.fromkeys(args.horizon)), args.seeds
        runtimes = _runtimes(args.runtime or ["skillstate"])
        tables = [(args.agents, args.out, None)]
        if seeds < 1 or min(horizons) < 1:
            raise UsageError("--seeds and --horizon must be at least 1")
    try:
        connection = _connection(args)
    except (OSError, ValueError) as error:
        raise UsageError(str(error)) from None
    rezip = getattr(args, "rezip", False)
    if rezip and runtimes != ["skillstate"]:
        raise UsageError("--rezip: reports revise the library's macros, and the baselines must see the same P as "
                         "skillstate: run --rezip with --runtime skillstate alone")  # fmt: skip
    if args.command == "sim" and args.agents_per_skill:
        if len(horizons) > 1 or seeds > 1:
            raise UsageError("--agents-per-skill runs one --horizon and one seed")
        args.horizon = horizons[0]
        async with local_server(args.server) as address:
            return await team.run(args, runtimes, model, address, connection)
    plans = [(_configs(args, env, agents, horizons, seeds, runtimes, model), out, title)
             for agents, out, title in tables]  # fmt: skip
    complete = True  # a table with a failed run is written all the same, and the next one runs
    async with local_server(args.server) as address:
        for configs, out, title in plans:
            if title is not None:
                print(f"{title}\n")
            complete = await _run_table(address, configs, args, out, connection, seeds) and complete
        if args.command == "demo":
            complete = await team.demo(model, address, connection, args.out / "at-once", args.transport) and complete
    return 0 if complete else 1


def _configs(
    args: argparse.Namespace, env: str, agents: int, horizons: list[int], seeds: int, runtimes: list[str], model: str
) -> list[SimConfig]:
    from skillstate.agents.sims.sequential import SimConfig

    options = {
        "scenario": getattr(args, "scenario", None), "result_limit": args.result_limit,
        "reply_words": getattr(args, "reply_words", None), "constrained": getattr(args, "constrained", False),
        "transport": args.transport, "rezip": getattr(args, "rezip", False),
    }  # fmt: skip
    if getattr(args, "recall", None) is not None:
        options["recall"] = args.recall
    configs = []
    ordered = sorted(runtimes, key=lambda runtime: runtime != "skillstate")  # its prompts size the windows
    for horizon in horizons:
        for seed in range(args.seed, args.seed + seeds):
            for runtime in ordered:
                try:
                    configs.append(SimConfig(env, agents, horizon, runtime, args.noise, seed, model, **options))
                except ValueError as error:
                    raise UsageError(str(error)) from None
    return configs


async def _run_table(
    address: str, configs: list[SimConfig], args: argparse.Namespace, out: Path, connection: dict[str, Any], seeds: int
) -> bool:
    """Run `configs` one after another and print and write their table; False when a run failed (said why)."""
    from skillstate.agents.reports.results import FailedRun, notes, recovery_table, table, write
    from skillstate.agents.reports.seeds import markdown as seed_table
    from skillstate.agents.reports.seeds import table_rows

    results: list[SimResult] = []
    failed: list[FailedRun] = []
    for config in configs:
        try:
            results.append(await _run_one(address, config, args, out, results, connection))
        except Exception as error:  # a model, a key, a missing skill: that run failed; the others go on
            if getattr(error, "status", None) is not None:
                raise  # a server error: main maps its status to an exit code
            failed.append(FailedRun.of(config, error))
            print(f"skillstate {args.command}: {failed[-1].line()}", file=sys.stderr)
        write(results, out, failed)  # kept current as runs end
    if not results:
        return False
    paths = write(results, out, failed)
    print(table(results) if seeds == 1 else seed_table(table_rows(results)))
    if recovery := recovery_table(results):
        print(f"\n{recovery}")
    print()
    print(notes(results, failed))
    print(f"\nresults: {paths['json']}, {paths['table']}, plot: {paths['plot']}, steps: {out / 'steps.jsonl'}\n")
    return not failed


def set_model_path(args: argparse.Namespace) -> None:
    """The model path flags, as the environment every model call (and worker process) reads."""
    from skillstate.agents.runtime.llm import ModelPath

    flags = {"SKILLSTATE_API_BASE": args.api_base, "SKILLSTATE_API_KEY": args.api_key,
             "SKILLSTATE_MAX_CONCURRENT_CALLS": args.max_concurrent_calls,
             "SKILLSTATE_CALL_TIMEOUT": args.call_timeout}  # fmt: skip
    os.environ.update({name: str(value) for name, value in flags.items() if value is not None})
    try:
        ModelPath.from_env()
    except ValueError as error:
        raise UsageError(str(error)) from None


def _runtimes(chosen: list[str]) -> list[str]:
    """The runtimes of repeated, comma-separated --runtime values, in order, each once."""
    from skillstate.agents.runtime.contexts import RUNTIMES

    names = [name.strip() for value in chosen for name in value.split(",") if name.strip()]
    if "all" in names:
        return ["skillstate", *BASELINES]
    unknown = [name for name in names if name not in RUNTIMES]
    if unknown:
        raise UsageError(f"--runtime: unknown {', '.join(unknown)} (one of {', '.join(RUNTIMES)}, or all)")
    return list(dict.fromkeys(names))


def _connection(args: argparse.Namespace) -> dict[str, Any]:
    """Tokens and TLS for `run_simulation`, from --tokens and --tls-ca."""
    from skillstate.clients import ClientTLS

    tokens = json.loads(args.tokens.read_text()) if args.tokens else None
    if tokens is not None and not (
        isinstance(tokens, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in tokens.items())
    ):
        raise ValueError(f"{args.tokens}: expected a JSON object of agent ids to tokens")
    return {"tokens": tokens, "tls": ClientTLS.from_files(args.tls_ca) if args.tls_ca else None}


async def _run_one(
    address: str,
    config: SimConfig,
    args: argparse.Namespace,
    out: Path,
    done: list[SimResult],
    connection: dict[str, Any],
) -> SimResult:
    from dataclasses import replace

    from skillstate.agents.sims.sequential import run_simulation

    if config.runtime in ("truncated", "summary"):
        ours = [r for r in done if (r.config.runtime, r.config.horizon, r.config.seed)
                == ("skillstate", config.horizon, config.seed)]  # fmt: skip
        window = args.window_tokens or (max(ours[0].prompt_sizes) if ours else config.window_tokens)
        config = replace(config, window_tokens=window)
    who = f"{config.agents} agent{'s' if config.agents > 1 else ''}"
    bar = RunProgress(f"T={config.horizon} seed {config.seed} {who:<8} {config.runtime:>10}", config.horizon)
    try:
        return await run_simulation(address, config, jsonl=out / "steps.jsonl", on_event=bar.update, **connection)
    finally:
        bar.close()


@contextlib.asynccontextmanager
async def local_server(address: str | None = None) -> AsyncIterator[str]:
    """`address` as it is, or a server in this process on a temporary SQLite file."""
    if address is not None:
        yield address
        return
    from skillstate.server.engine.config import EngineConfig
    from skillstate.server.rpc.app import start_server
    from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
    from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

    with tempfile.TemporaryDirectory(prefix="skillstate-sim-") as directory:
        db = Path(directory) / "sim.db"
        server = await start_server(SqliteRevisionLog(db), "127.0.0.1:0", EngineConfig(), SqliteSkillStore(db))
        try:
            yield f"127.0.0.1:{server.port}"
        finally:
            await server.stop(grace=1.0)  # an idle channel is told goodbye, not cut off
