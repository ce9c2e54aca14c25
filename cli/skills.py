"""`skillstate skills ...`: register, inspect and hydrate Agent Skills packages."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_BY_STATUS, client_options, connection_options, print_json

if TYPE_CHECKING:
    from skillstate.clients import SkillRegistryClient


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = connection_options()
    skills = commands.add_parser("skills", help="register skills and hydrate task contexts").add_subparsers(
        dest="subcommand", required=True
    )
    add = skills.add_parser("add", parents=[common], help="register skill package folders (each holds SKILL.md)")
    add.add_argument("paths", nargs="+", type=Path, help="package folders")
    add.add_argument("--strict", action="store_true", help="every deviation from the format is an error")

    skills.add_parser("list", parents=[common], help="print the current skills as JSON lines")
    skills.add_parser("stats", parents=[common], help="print the library's size and compression as JSON")

    show = skills.add_parser("show", parents=[common], help="print a skill's section graph as JSON")
    show.add_argument("name")
    show.add_argument("--version", type=int, default=0, help="a version (default: the current one)")

    remove = skills.add_parser("remove", parents=[common], help="take a skill out of the library")
    remove.add_argument("name")

    hydrate = skills.add_parser("hydrate", parents=[common], help="print the context for a task")
    hydrate.add_argument("query", help="the task, in words")
    hydrate.add_argument("--budget", type=int, default=3000, help="most tokens (default: %(default)s)")
    hydrate.add_argument("--skill", dest="skills", action="append", default=[], help="only this skill (repeatable)")
    hydrate.add_argument("--json", action="store_true", help="print the context with its coverage as JSON")

    expand = skills.add_parser("expand", parents=[common], help="print a macro of a recent hydration in more detail")
    expand.add_argument("hydration_id")
    expand.add_argument("macro_id")
    expand.add_argument("--level", choices=("name", "contract", "outline", "full"), default="full")


async def run(args: argparse.Namespace) -> int:
    from skillstate.clients import RetryPolicy, SkillRegistryClient

    async with SkillRegistryClient(args.server, retry=RetryPolicy(attempts=4), **client_options(args)) as client:
        if args.subcommand == "add":
            return await _add(client, args.paths, args.strict)
        if args.subcommand == "list":
            async for summary in client.list_skills():
                print_json(asdict(summary))
        elif args.subcommand == "stats":
            print_json(asdict(await client.library_stats()))
        elif args.subcommand == "show":
            print_json(asdict(await client.get_skill(args.name, version=args.version)))
        elif args.subcommand == "remove":
            print_json({"name": args.name, "removed_version": await client.remove_skill(args.name)})
        elif args.subcommand == "expand":
            print(await client.expand(args.hydration_id, args.macro_id, args.level), end="", flush=True)
        elif args.subcommand == "hydrate":
            hydrated = await client.hydrate(args.query, budget_tokens=args.budget, skill_names=args.skills)
            if args.json:
                print_json(asdict(hydrated))
            else:
                print(hydrated.context, flush=True)
                covered = f"{len(hydrated.anchors_covered)}/{len(hydrated.anchors)} anchors"
                print(
                    f"[{hydrated.token_count} tokens, {covered}, skills: {', '.join(hydrated.source_skills)}]",
                    file=sys.stderr,
                )
    return 0


async def _add(client: SkillRegistryClient, paths: list[Path], strict: bool) -> int:
    """Register each folder; a folder that cannot be read or loaded is reported and the rest go on."""
    from skillstate.clients import PackageReadError, SkillstateError

    failed = 0
    for path in paths:
        try:
            registered = await client.register_folder(path, strict=strict)
        except (PackageReadError, SkillstateError) as e:
            if isinstance(e, SkillstateError) and e.status.name == "UNAVAILABLE":
                raise
            print(f"skillstate: {path}: {e}", file=sys.stderr)
            failed += 1
            continue
        for warning in registered.warnings:
            where = f"{warning.file}:{warning.line}" if warning.line else warning.file
            print(f"warning: {where}: {warning.rule}: {warning.message}", file=sys.stderr)
        print_json({k: v for k, v in asdict(registered).items() if k != "warnings"} | {"path": str(path)})
    return EXIT_BY_STATUS["INVALID_ARGUMENT"] if failed else 0
