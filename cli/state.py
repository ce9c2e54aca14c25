"""`skillstate state ...`: create, read, patch, watch, compact, list and delete executions."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import UsageError, add_command, client_options, connection_options
from .output import Printer, output_options

EXECUTION_COLUMNS = ("execution_id", "head_revision", "create_time", "update_time", "agents")
REVISION_COLUMNS = ("revision", "agent_id", "commit_time", "action", "applied_patch")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_command(
        commands,
        "state",
        help="read and change execution state",
        example="skillstate state get order-1 -o yaml\nskillstate --server 10.0.0.5:50051 state list -o table",
    )
    state = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    common = (connection_options(), output_options())

    create = add_command(
        state, "create", help="create an execution", parents=common,
        example="skillstate state create order-1 --state '{\"step\": 1}' --schema @schema.json",
    )  # fmt: skip
    create.add_argument("execution_id", nargs="?", default="", help="id (default: server-assigned)")
    create.add_argument("--schema", default=None, help="JSON Schema: JSON text, @FILE or - for stdin")
    create.add_argument("--state", default=None, help="initial state: JSON text, @FILE or -")

    get = add_command(
        state, "get", help="print the state", parents=common, example="skillstate state get order-1 --at 3"
    )
    get.add_argument("execution_id")
    get.add_argument("--at", type=int, default=None, help="a committed revision (default: head)")

    patch = add_command(
        state, "patch", help="submit a JSON merge patch", parents=common,
        example="skillstate state patch order-1 '{\"step\": 2, \"draft\": null}' --base 1",
    )  # fmt: skip
    patch.add_argument("execution_id")
    patch.add_argument("patch", help="the patch: JSON text, @FILE or -")
    patch.add_argument("--agent", default="", help="agent id (with a token: the token's agent)")
    patch.add_argument("--base", default="head", help="base revision, or 'head' to read it first (default)")
    patch.add_argument("--action", default=None, help="action to record: JSON text, @FILE or -")
    patch.add_argument("--id", dest="client_patch_id", default=None, help="idempotency key (default: random)")

    watch = add_command(
        state, "watch", help="print revisions as they are committed", parents=common,
        example="skillstate state watch order-1 --from 10 -o table",
    )  # fmt: skip
    watch.add_argument("execution_id")
    watch.add_argument("--from", dest="from_revision", type=int, default=0, help="start after this revision")
    watch.add_argument("--count", type=int, default=None, help="stop after this many revisions")

    history = add_command(
        state, "history", help="print the audit trail", parents=common,
        example="skillstate state history order-1 --from 1 --to 20 -o table",
    )  # fmt: skip
    history.add_argument("execution_id")
    history.add_argument("--from", dest="from_revision", type=int, default=1)
    history.add_argument("--to", dest="to_revision", type=int, default=0, help="last revision (default: head)")

    compact = add_command(
        state, "compact", help="drop history up to the newest snapshot at or before a revision", parents=common,
        example="skillstate state compact order-1 --up-to 100",
    )  # fmt: skip
    compact.add_argument("execution_id")
    compact.add_argument("--up-to", dest="up_to_revision", type=int, required=True, help="a revision (0..head)")

    listing = add_command(
        state, "list", help="print the executions you may read", parents=common,
        example="skillstate state list --prefix order- -o table",
    )  # fmt: skip
    listing.add_argument("--prefix", default="", help="only executions whose id starts with this")

    delete = add_command(
        state, "delete", help="delete an execution whole (cannot be undone)", parents=common,
        example="skillstate state delete order-1",
    )  # fmt: skip
    delete.add_argument("execution_id")


def read_json(text: str | None, what: str) -> Any:
    """Decode an argument given as JSON text, @FILE or - (stdin); UsageError with a message if bad."""
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise UsageError(f"{what}: cannot read {text[1:]}: {e.strerror}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{what}: not valid JSON: {e}") from e


async def run(args: argparse.Namespace) -> None:
    from skillstate.clients import RetryPolicy, StateClient

    out = Printer(args.output)
    options = client_options(args)
    async with StateClient(args.server, retry=RetryPolicy(attempts=4), **options) as client:  # 0.35-0.7 s of retries
        if args.subcommand == "create":
            created = await client.create_execution(
                args.execution_id,
                schema=read_json(args.schema, "--schema"),
                initial_state=read_json(args.state, "--state"),
            )
            out.one(created)
        elif args.subcommand == "get":
            out.one(await client.get_state(args.execution_id, args.at))
        elif args.subcommand == "patch":
            patch = read_json(args.patch, "patch")
            if args.base == "head":
                base = (await client.get_state(args.execution_id)).revision
            elif args.base.isdigit():
                base = int(args.base)
            else:
                raise UsageError(f"--base: expected a revision number or 'head', got {args.base!r}")
            result = await client.submit_patch(
                args.execution_id,
                patch,
                agent_id=args.agent,
                base_revision=base,
                action=read_json(args.action, "--action"),
                client_patch_id=args.client_patch_id,
            )
            out.one(result)
        elif args.subcommand == "watch":
            seen = 0
            async for event in client.watch(args.execution_id, args.from_revision):
                out.stream(event, REVISION_COLUMNS, first=seen == 0)
                seen += 1
                if args.count is not None and seen >= args.count:
                    return
        elif args.subcommand == "history":
            history = client.history(args.execution_id, args.from_revision, args.to_revision)
            await out.rows(history, REVISION_COLUMNS)
        elif args.subcommand == "compact":
            out.one({"compact_revision": await client.compact(args.execution_id, args.up_to_revision)})
        elif args.subcommand == "list":
            await out.rows(client.executions(args.prefix), EXECUTION_COLUMNS)
        elif args.subcommand == "delete":
            head = await client.delete_execution(args.execution_id)
            out.one({"deleted": args.execution_id, "head_revision": head})
