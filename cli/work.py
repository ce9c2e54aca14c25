"""`skillstate work "TASK" --workdir DIR --model MODEL`: the paper's runtime doing a real task in a folder
(skillstate.agents.work)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from .common import UsageError, add_command
from .sim import set_model_path


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    work = add_command(
        commands, "work", help="work on a task in a folder: the SKILL.state runtime with shell and file tools",
        example='skillstate work "add a --json flag to cli.py" --workdir proj --model gpt-4o-mini --check "pytest"\n'
        "skillstate work --task-file SPEC.md --workdir proj --model openai/qwen2.5 --api-base http://127.0.0.1:8000/v1",
    )  # fmt: skip
    work.add_argument("task", nargs="?", default=None, help="what to do (or --task-file)")
    work.add_argument("--task-file", type=Path, default=None, metavar="SPEC.md", help="the task, from a file")
    work.add_argument("--workdir", type=Path, required=True, metavar="DIR", help="where the tools act, and only there")
    work.add_argument("--model", required=True, help="any litellm model string")
    work.add_argument("--api-base", default=None, metavar="URL", help="an OpenAI-compatible server for --model")
    work.add_argument("--api-key", default=None, help="the key for --api-base (default: litellm's usual variable)")
    work.add_argument("--max-concurrent-calls", type=int, default=None, metavar="N", help="model calls at once")
    work.add_argument("--call-timeout", type=float, default=None, metavar="SECONDS",
                      help="seconds one attempt of a model call may take (default: 120)")  # fmt: skip
    work.add_argument("--skill", type=Path, default=None, metavar="DIR",
                      help="an Agent Skills folder; its execution schema is DIR/state.schema.json when present "
                      "(default: the shipped coding skill)")  # fmt: skip
    work.add_argument("--window", type=int, default=1, metavar="K", help="action records the observation holds")
    work.add_argument("--batch", action="store_true", help='the reply may carry "actions": [...], run in order')
    work.add_argument("--check", default=None, metavar="CMD", help="a finish is accepted only if CMD exits 0 in DIR")
    work.add_argument("--max-steps", type=int, default=50, metavar="N")
    work.add_argument("--timeout-s", type=float, default=1800.0, metavar="S")
    work.add_argument("--out", type=Path, default=Path("work-results"), help="results.json and steps.jsonl")
    work.add_argument("--server", default=None, help="host:port of a running server (default: one in-process)")


def skill_folder(given: Path | None) -> Path:
    if given is not None:
        return given
    from skillstate.project_skills import FOLDER

    return FOLDER / "coding"


def read_skill(folder: Path) -> tuple[str, dict[str, Any] | None]:
    """The skill's SKILL.md and its execution schema (None: the permissive default)."""
    try:
        text = (folder / "SKILL.md").read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--skill: {folder} has no readable SKILL.md ({error.strerror})") from None
    schema_file = folder / "state.schema.json"
    if not schema_file.exists():
        return text, None
    try:
        schema = json.loads(schema_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"--skill: {schema_file} is not JSON: {error}") from None
    if not isinstance(schema, dict):
        raise UsageError(f"--skill: {schema_file} must hold a JSON Schema object")
    return text, schema


def run(args: argparse.Namespace) -> int:
    """Exit 0 for an accepted finish, 1 for a run that ended without one (2, usage, comes from main)."""
    from skillstate.agents.work.loop import PERMISSIVE_SCHEMA, WorkConfig

    if (args.task is None) == (args.task_file is None):
        raise UsageError("give the task, or --task-file, not both")
    task = args.task if args.task is not None else _read(args.task_file)
    if not args.workdir.is_dir():
        raise UsageError(f"--workdir: {args.workdir} is not a folder")
    if args.model.startswith("skillstate/"):
        raise UsageError("--model: work needs a model; the scripted test policies play simulations only")
    set_model_path(args)
    text, schema = read_skill(skill_folder(args.skill))
    try:
        config = WorkConfig(task, args.workdir, args.model, text, schema or dict(PERMISSIVE_SCHEMA),
                            window=args.window, batch=args.batch, check=args.check, max_steps=args.max_steps,
                            timeout_s=args.timeout_s)  # fmt: skip
    except ValueError as error:
        raise UsageError(str(error)) from None
    result = asyncio.run(_work(config, args))
    verdict = "accepted" if result.finish_accepted else f"not accepted ({result.ended})"
    print(f"{result.steps} steps, {result.model_calls} model calls, {result.input_tokens:,} input tokens "
          f"({result.cached_input_tokens:,} cached), {result.output_tokens:,} output tokens, {result.wall_s} s: "
          f"finish {verdict}. results: {args.out / 'results.json'}")  # fmt: skip
    return 0 if result.finish_accepted else 1


async def _work(config: Any, args: argparse.Namespace) -> Any:
    from skillstate.agents.work.loop import run_work
    from skillstate.clients import StateClient

    from .sim import local_server

    async with local_server(args.server) as address, StateClient(address) as client:
        return await run_work(client, config, args.out, on_step=lambda r: print(
            f"step {r.steps}: {r.model_calls} calls, {r.input_tokens:,} input tokens", file=sys.stderr))  # fmt: skip


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--task-file: {path}: {error.strerror}") from None
