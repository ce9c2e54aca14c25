"""`skillstate auth`: issue, list and revoke the bearer tokens a server accepts.

It writes the server's database directly (run it where the server runs); a running server sees a new or
revoked credential within seconds (docs/security.md).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import asdict
from typing import Any

from .common import UsageError, add_command
from .output import Printer, output_options

DURATION = re.compile(r"^(\d+)([smhd])$")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
CREDENTIAL_COLUMNS = ("token_id", "agent", "rights", "executions", "skills", "expires_at", "revoked_at")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_command(
        commands, "auth", help="issue, list and revoke credentials",
        example="skillstate auth issue --agent shipping --executions 'order-*' --db state.db",
    )  # fmt: skip
    auth = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument(
        "--db", default="skillstate.db", help="the server's SQLite file or PostgreSQL URL (default: %(default)s)"
    )

    issue = add_command(
        auth, "issue", help="issue a token and print it (shown once)", parents=(db, output_options()),
        example="skillstate auth issue --agent console --executions '*' --rights read --expires-in 30d",
    )  # fmt: skip
    issue.add_argument("--agent", required=True, help="the identity every call with the token carries")
    issue.add_argument(
        "--executions", nargs="+", default=[], metavar="ID", help="execution ids or patterns (`order-*`, `*`)"
    )
    issue.add_argument("--skills", nargs="*", default=[], metavar="NAME", help="skills the agent runs")
    issue.add_argument(
        "--rights",
        default="read,write",
        help="comma-separated: read, write, publish, admin, registry (default: %(default)s)",
    )
    issue.add_argument("--expires-in", default=None, metavar="DURATION", help="e.g. 3600s, 90m, 12h, 30d")

    add_command(
        auth, "list", help="print every credential (never a secret)", parents=(db, output_options()),
        example="skillstate auth list --db state.db -o table",
    )  # fmt: skip
    revoke = add_command(
        auth, "revoke", help="revoke a credential by its token id", parents=(db, output_options()),
        example="skillstate auth revoke tok_5c1d2e --db state.db",
    )  # fmt: skip
    revoke.add_argument("token_id")


async def run(args: argparse.Namespace) -> int:
    from skillstate.server.errors import InvalidArgumentError, NotFoundError, StateError

    try:
        return await _run(args)
    except StateError as e:
        print(f"skillstate auth: {e}", file=sys.stderr)
        return 3 if isinstance(e, NotFoundError) else 5 if isinstance(e, InvalidArgumentError) else 1


async def _run(args: argparse.Namespace) -> int:
    from skillstate.server.auth.credentials import issue, revoke
    from skillstate.server.storage.backends import open_credential_store
    from skillstate.server.storage.records import Right

    store = open_credential_store(args.db)
    await store.open()
    try:
        out = Printer(args.output)
        if args.subcommand == "issue":
            try:
                rights = [Right(r.strip()) for r in args.rights.split(",") if r.strip()]
            except ValueError as e:
                raise UsageError(f"--rights: {e}; choose from {', '.join(r.value for r in Right)}") from None
            issued = await issue(
                store, args.agent, args.executions, args.skills, rights, _duration(args.expires_in, UsageError)
            )
            out.one({"token": issued.token, **_public(issued.credential)})
        elif args.subcommand == "list":
            await out.rows([_public(credential) for credential in await store.all()], CREDENTIAL_COLUMNS)
        elif args.subcommand == "revoke":
            out.one(_public(await revoke(store, args.token_id)))
    finally:
        await store.close()
    return 0


def _public(credential: Any) -> dict[str, Any]:
    fields = asdict(credential)
    fields["rights"] = sorted(r.value for r in credential.rights)
    return fields


def _duration(text: str | None, error: type[Exception]) -> float | None:
    if text is None:
        return None
    found = DURATION.match(text)
    if not found:
        raise error(f"--expires-in: expected a number and a unit (s, m, h, d), got {text!r}")
    return int(found.group(1)) * SECONDS[found.group(2)]
