"""`skillstate skills ...`: register, inspect and hydrate Agent Skills packages."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_BY_STATUS, add_command, client_options, connection_options
from .output import Printer, output_options

if TYPE_CHECKING:
    from skillstate.clients import SkillRegistryClient

SKILL_COLUMNS = ("name", "version", "section_count", "token_count", "description")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_command(
        commands, "skills", help="register skills and hydrate task contexts",
        example="skillstate skills add ./skills/receiving\nskillstate skills hydrate 'ship order 7' --budget 1500",
    )  # fmt: skip
    skills = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    common = (connection_options(), output_options())
    add = add_command(
        skills, "add", help="register skill package folders (each holds SKILL.md)", parents=common,
        example="skillstate skills add ./skills/receiving ./skills/shipping --strict",
    )  # fmt: skip
    add.add_argument("paths", nargs="+", type=Path, help="package folders")
    add.add_argument("--strict", action="store_true", help="every deviation from the format is an error")

    add_command(
        skills, "list", help="print the current skills", parents=common, example="skillstate skills list -o table"
    )
    add_command(
        skills, "stats", help="print the library's size and compression", parents=common,
        example="skillstate skills stats -o yaml",
    )  # fmt: skip

    show = add_command(
        skills, "show", help="print a skill's section graph", parents=common,
        example="skillstate skills show receiving --version 2",
    )  # fmt: skip
    show.add_argument("name")
    show.add_argument("--version", type=int, default=0, help="a version (default: the current one)")

    remove = add_command(
        skills, "remove", help="take a skill out of the library", parents=common,
        example="skillstate skills remove receiving",
    )  # fmt: skip
    remove.add_argument("name")

    hydrate = add_command(
        skills, "hydrate", help="print the context for a task", parents=(connection_options(), output_options(None)),
        example="skillstate skills hydrate 'restock shelf 3' --budget 2000 --skill receiving",
    )  # fmt: skip
    hydrate.add_argument("query", help="the task, in words")
    hydrate.add_argument("--budget", type=int, default=3000, help="most tokens (default: %(default)s)")
    hydrate.add_argument("--skill", dest="skills", action="append", default=[], help="only this skill (repeatable)")
    hydrate.add_argument(
        "--json", dest="output", action="store_const", const="json",
        help="the same as -o json (default, without -o: the context as text, its summary on standard error)",
    )  # fmt: skip

    expand = add_command(
        skills, "expand", help="print a macro of a recent hydration in more detail", parents=(connection_options(),),
        example="skillstate skills expand 3f2a9c m1 --level outline",
    )  # fmt: skip
    expand.add_argument("hydration_id")
    expand.add_argument("macro_id")
    expand.add_argument("--level", choices=("name", "contract", "outline", "full"), default="full")


async def run(args: argparse.Namespace) -> int:
    from skillstate.clients import RetryPolicy, SkillRegistryClient

    async with SkillRegistryClient(args.server, retry=RetryPolicy(attempts=4), **client_options(args)) as client:
        out = Printer(getattr(args, "output", None) or "json")
        if args.subcommand == "add":
            return await _add(client, args.paths, args.strict, out)
        if args.subcommand == "list":
            await out.rows(client.list_skills(), SKILL_COLUMNS)
        elif args.subcommand == "stats":
            out.one(await client.library_stats())
        elif args.subcommand == "show":
            out.one(await client.get_skill(args.name, version=args.version))
        elif args.subcommand == "remove":
            out.one({"name": args.name, "removed_version": await client.remove_skill(args.name)})
        elif args.subcommand == "expand":
            print(await client.expand(args.hydration_id, args.macro_id, args.level), end="", flush=True)
        elif args.subcommand == "hydrate":
            hydrated = await client.hydrate(args.query, budget_tokens=args.budget, skill_names=args.skills)
            if args.output:
                out.one(hydrated)
            else:
                print(hydrated.context, flush=True)
                covered = f"{len(hydrated.anchors_covered)}/{len(hydrated.anchors)} anchors"
                print(
                    f"[{hydrated.token_count} tokens, {covered}, skills: {', '.join(hydrated.source_skills)}]",
                    file=sys.stderr,
                )
    return 0


async def _add(client: SkillRegistryClient, paths: list[Path], strict: bool, out: Printer) -> int:
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
        out.one({k: v for k, v in asdict(registered).items() if k != "warnings"} | {"path": str(path)})
    return EXIT_BY_STATUS["INVALID_ARGUMENT"] if failed else 0
