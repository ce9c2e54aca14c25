"""The `skillstate` command. Each subcommand imports what it needs only when it runs; what they share,
exit codes included, is in common.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .common import EXIT_BY_STATUS, UsageError, client_options, connection_options, print_json, require_extra

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillstate", description="Shared execution state for LLM agents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the server (state service and skill registry)")
    serve.add_argument("--db", default="skillstate.db", help="SQLite file, or :memory: (default: %(default)s)")
    serve.add_argument("--listen", default="127.0.0.1:50051", help="host:port (default: %(default)s)")
    serve.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
        help=f"logging level: {', '.join(LOG_LEVELS)} (default: %(default)s)",
    )  # fmt: skip
    serve.add_argument(
        "--extractor",
        default=None,
        metavar="MODEL",
        help="a litellm model string: Sec2Graph asks it for each section's role and contract "
        "(default: the deterministic rules, no model)",
    )
    serve.add_argument(
        "--extractor-cache",
        default=None,
        metavar="PATH",
        help="where extractions are cached (default: DB.extractions.jsonl beside a SQLite --db; none on PostgreSQL)",
    )
    serve.add_argument("--tls-cert", default=None, metavar="PEM", help="the server's certificate chain (turns TLS on)")
    serve.add_argument("--tls-key", default=None, metavar="PEM", help="the server's private key")
    serve.add_argument(
        "--tls-client-ca", default=None, metavar="PEM", help="require client certificates signed by this CA (mTLS)"
    )
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="accept calls without credentials on any address (on loopback the server is open until the first "
        "`skillstate auth issue` anyway)",
    )
    serve.add_argument(
        "--max-in-flight",
        type=int,
        default=1024,
        metavar="N",
        help="unary calls one identity may have running at once (default: %(default)s)",
    )
    serve.add_argument(
        "--seats",
        type=int,
        default=64,
        metavar="N",
        help="calls running at once, shared fairly: an identity with fewer running goes first (default: %(default)s)",
    )
    serve.add_argument(
        "--metrics-listen",
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: none)",
    )
    serve.add_argument(
        "--inline-commit-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="longest a group commit to SQLite may hold the event loop: three of the last eight over it move "
        "commits to the writer's thread for a minute; 0 keeps every commit in the thread, as for a network disk "
        "(default: 0.01)",
    )
    serve.add_argument(
        "--max-db-bytes",
        type=int,
        default=None,
        metavar="N",
        help="cap the revision log's database file: commits beyond it are refused RESOURCE_EXHAUSTED, as a full "
        "disk would be (default: no cap)",
    )
    serve.add_argument(
        "--subscriber-queue",
        type=int,
        default=1024,
        metavar="N",
        help="revisions or observations a stream may fall behind before it is cut (default: %(default)s)",
    )
    serve.add_argument(
        "--max-watchers",
        type=int,
        default=1024,
        metavar="N",
        help="watch streams, and observation streams, per execution (default: %(default)s)",
    )
    serve.add_argument(
        "--ack-deadline",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a consumer group's member may hold an observation unacknowledged before another member "
        "gets it, unless the group asked for its own (default: %(default)s)",
    )
    serve.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a Watch or Session stream that sent nothing for this long is sent a progress message "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--max-stream-in-flight",
        type=int,
        default=64,
        metavar="N",
        help="submits one Session stream may have unanswered before the server reads no more of it "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--retain-revisions",
        type=int,
        default=None,
        metavar="N",
        help="keep at least N revisions of history per execution, compacting older ones into snapshots "
        "(default: keep everything)",
    )

    state = commands.add_parser("state", help="read and change execution state").add_subparsers(
        dest="subcommand", required=True
    )
    common = connection_options()

    create = state.add_parser("create", parents=[common], help="create an execution")
    create.add_argument("execution_id", nargs="?", default="", help="id (default: server-assigned)")
    create.add_argument("--schema", default=None, help="JSON Schema: JSON text, @FILE or - for stdin")
    create.add_argument("--state", default=None, help="initial state: JSON text, @FILE or -")

    get = state.add_parser("get", parents=[common], help="print the state")
    get.add_argument("execution_id")
    get.add_argument("--at", type=int, default=None, help="a committed revision (default: head)")

    patch = state.add_parser("patch", parents=[common], help="submit a JSON merge patch")
    patch.add_argument("execution_id")
    patch.add_argument("patch", help="the patch: JSON text, @FILE or -")
    patch.add_argument("--agent", default="", help="agent id (with a token: the token's agent)")
    patch.add_argument("--base", default="head", help="base revision, or 'head' to read it first (default)")
    patch.add_argument("--action", default=None, help="action to record: JSON text, @FILE or -")
    patch.add_argument("--id", dest="client_patch_id", default=None, help="idempotency key (default: random)")

    watch = state.add_parser("watch", parents=[common], help="print revisions as JSON lines")
    watch.add_argument("execution_id")
    watch.add_argument("--from", dest="from_revision", type=int, default=0, help="start after this revision")
    watch.add_argument("--count", type=int, default=None, help="stop after this many revisions")

    history = state.add_parser("history", parents=[common], help="print the audit trail as JSON lines")
    history.add_argument("execution_id")
    history.add_argument("--from", dest="from_revision", type=int, default=1)
    history.add_argument("--to", dest="to_revision", type=int, default=0, help="last revision (default: head)")

    compact = state.add_parser(
        "compact", parents=[common], help="drop history up to the newest snapshot at or before a revision"
    )
    compact.add_argument("execution_id")
    compact.add_argument("--up-to", dest="up_to_revision", type=int, required=True, help="a revision (0..head)")

    listing = state.add_parser("list", parents=[common], help="print the executions you may read as JSON lines")
    listing.add_argument("--prefix", default="", help="only executions whose id starts with this")

    delete = state.add_parser("delete", parents=[common], help="delete an execution whole (cannot be undone)")
    delete.add_argument("execution_id")

    from . import auth, sim, skills

    skills.add_parser(commands)
    sim.add_parsers(commands)
    auth.add_parser(commands)
    return parser


def read_json(text: str | None, what: str) -> Any:
    """Decode an argument given as JSON text, @FILE or - (stdin); SystemExit(2) with a message if bad."""
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


class ServeError(Exception):
    """The server could not start (address taken, log unusable); exit code 1."""


async def run_state(args: argparse.Namespace) -> None:
    from dataclasses import asdict

    from skillstate.clients import RetryPolicy, StateClient

    options = client_options(args)
    async with StateClient(args.server, retry=RetryPolicy(attempts=4), **options) as client:  # 0.35-0.7 s of retries
        if args.subcommand == "create":
            created = await client.create_execution(
                args.execution_id,
                schema=read_json(args.schema, "--schema"),
                initial_state=read_json(args.state, "--state"),
            )
            print_json(asdict(created))
        elif args.subcommand == "get":
            print_json(asdict(await client.get_state(args.execution_id, args.at)))
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
            print_json(asdict(result))
        elif args.subcommand == "watch":
            seen = 0
            async for event in client.watch(args.execution_id, args.from_revision):
                print_json(asdict(event))
                seen += 1
                if args.count is not None and seen >= args.count:
                    return
        elif args.subcommand == "history":
            async for event in client.history(args.execution_id, args.from_revision, args.to_revision):
                print_json(asdict(event))
        elif args.subcommand == "compact":
            print_json({"compact_revision": await client.compact(args.execution_id, args.up_to_revision)})
        elif args.subcommand == "list":
            async for summary in client.executions(args.prefix):
                print_json(asdict(summary))
        elif args.subcommand == "delete":
            head = await client.delete_execution(args.execution_id)
            print_json({"deleted": args.execution_id, "head_revision": head})


def run_serve(args: argparse.Namespace) -> None:
    import logging

    from skillstate.server.engine.config import EngineConfig
    from skillstate.server.rpc.app import serve

    if args.retain_revisions is not None and args.retain_revisions < 0:
        raise UsageError("--retain-revisions: must be >= 0")
    from skillstate.server.errors import StorageError

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    extractor = None
    if args.extractor:
        require_extra("serve --extractor", "agents", "litellm", "pydantic")
        from pathlib import Path

        from skillstate.server.skills.llm_extract import FileCache, LlmExtractor
        from skillstate.server.storage.backends import MEMORY, is_postgres_url

        beside_db = args.db != MEMORY and not is_postgres_url(args.db)  # a URL names no folder to write into
        cache_path = args.extractor_cache or (f"{args.db}.extractions.jsonl" if beside_db else None)
        extractor = LlmExtractor(args.extractor, FileCache(Path(cache_path)) if cache_path else None)
    if args.db.startswith(("postgresql://", "postgres://")):
        require_extra("serve --db postgresql://...", "postgres", "asyncpg")
    if args.metrics_listen:
        require_extra("serve --metrics-listen", "metrics", "prometheus_client")
    for option in ("max_in_flight", "seats", "subscriber_queue", "max_watchers", "max_stream_in_flight"):
        if getattr(args, option) < 1:
            raise UsageError(f"--{option.replace('_', '-')}: must be >= 1")
    if args.max_db_bytes is not None and args.max_db_bytes < 1 << 16:
        raise UsageError("--max-db-bytes: must be at least 65536")
    from skillstate.server.storage.sqlite_writer import INLINE_BUDGET

    inline_commit_budget = INLINE_BUDGET if args.inline_commit_budget is None else args.inline_commit_budget
    if not 0 <= inline_commit_budget <= 1:
        raise UsageError("--inline-commit-budget: must be at least 0 and at most 1 second")
    if not 0 < args.ack_deadline <= 3600:
        raise UsageError("--ack-deadline: must be more than 0 and at most 3600 seconds")
    if not 0 < args.progress_interval <= 3600:
        raise UsageError("--progress-interval: must be more than 0 and at most 3600 seconds")
    config = EngineConfig(
        retain_revisions=args.retain_revisions,
        subscriber_queue=args.subscriber_queue,
        max_watchers=args.max_watchers,
        ack_deadline=args.ack_deadline,
        progress_interval=args.progress_interval,
        max_stream_in_flight=args.max_stream_in_flight,
    )
    try:
        tls = _server_tls(args)
        asyncio.run(
            serve(
                db=args.db, listen=args.listen, config=config, extractor=extractor,
                insecure_no_auth=args.insecure_no_auth, tls=tls, in_flight_limit=args.max_in_flight,
                seats=args.seats,
                max_db_bytes=args.max_db_bytes, inline_commit_budget=inline_commit_budget,
                metrics_listen=args.metrics_listen,
            )
        )  # fmt: skip
    except (OSError, StorageError) as e:
        raise ServeError(str(e)) from e


def _server_tls(args: argparse.Namespace) -> Any:
    from skillstate.server.rpc.app import ServerTLS

    if not (args.tls_cert or args.tls_key or args.tls_client_ca):
        return None
    if not (args.tls_cert and args.tls_key):
        raise UsageError("--tls-cert and --tls-key are both needed for TLS")
    try:
        return ServerTLS.from_files(args.tls_cert, args.tls_key, args.tls_client_ca)
    except OSError as e:
        raise UsageError(f"{e.filename}: {e.strerror}") from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillstate")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            run_serve(args)
        elif args.command == "state":
            asyncio.run(run_state(args))
        elif args.command == "skills":
            from . import skills

            return asyncio.run(skills.run(args))
        elif args.command == "auth":
            from . import auth

            return asyncio.run(auth.run(args))
        elif args.command in ("sim", "demo"):
            require_extra(f"skillstate {args.command}", "agents", "litellm", "scipy")
            require_extra(f"skillstate {args.command}", "plots", "matplotlib")
            from . import sim

            return asyncio.run(sim.run(args))
    except UsageError as e:
        print(f"skillstate: {e}", file=sys.stderr)
        return 2
    except ServeError as e:
        print(f"skillstate serve: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`skillstate state history X | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # the client's typed errors carry a status: map it to a stable exit code
        status = getattr(getattr(e, "status", None), "name", None)
        if status is None:
            raise
        print(f"skillstate: {e}", file=sys.stderr)
        return EXIT_BY_STATUS.get(status, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
