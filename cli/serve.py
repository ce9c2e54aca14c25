"""`skillstate serve`: the state service and the skill registry in one process, with its settings from flags,
`SKILLSTATE_*` environment variables and a TOML file (settings.py), and optionally the web console beside it."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any

from .common import UsageError, add_command, listen_address, require_extra
from .logs import configure_logging, logging_options
from .settings import layered_defaults

EXAMPLE = """skillstate serve --db state.db --listen 127.0.0.1:50051
SKILLSTATE_SEATS=128 skillstate serve --config /etc/skillstate/serve.toml --log-format json
skillstate serve --console 127.0.0.1:8080"""


class ServeError(Exception):
    """The server could not start (address taken, log unusable); exit code 1."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    serve = add_command(
        commands,
        "serve",
        help="run the server (state service and skill registry)",
        example=EXAMPLE,
        parents=(logging_options(),),
    )
    serve.add_argument(
        "--config", default=None, metavar="TOML",
        help="settings file: keys named as the flags (`max-in-flight = 2048`); flags win over SKILLSTATE_* "
        "environment variables, which win over the file (default: $SKILLSTATE_CONFIG, else none)",
    )  # fmt: skip
    serve.add_argument("--db", default="skillstate.db", help="SQLite file, or :memory: (default: %(default)s)")
    serve.add_argument("--listen", default="127.0.0.1:50051", help="host:port (default: %(default)s)")
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
        "--max-loaded-executions",
        type=int,
        default=10_000,
        metavar="N",
        help="executions kept in memory beyond those in use; idle ones beyond N are unloaded, least recently "
        "used first, and loaded again from the log when next used (default: %(default)s)",
    )
    serve.add_argument(
        "--retain-revisions",
        type=int,
        default=None,
        metavar="N",
        help="keep at least N revisions of history per execution, compacting older ones into snapshots "
        "(default: keep everything)",
    )
    serve.add_argument(
        "--lease-seconds", type=float, default=3.0, metavar="SECONDS",
        help="replicas on PostgreSQL: each execution has one owner, which keeps its lease this long after its "
        "last heartbeat (a dead owner is taken over after it); 0 turns leases off, and every replica then "
        "commits to every execution, racing the others (default: %(default)s)",
    )  # fmt: skip
    serve.add_argument(
        "--advertise", default=None, metavar="HOST:PORT",
        help="replicas on PostgreSQL: where the others forward calls for the executions this one owns "
        "(default: the --listen address, loopback for a wildcard)",
    )  # fmt: skip

    serve.add_argument(
        "--console", default=None, metavar="HOST:PORT",
        help="serve the web console here too, calling this server (needs the 'console' extra; not with TLS)",
    )  # fmt: skip
    serve.add_argument(
        "--console-token", default=None, metavar="TOKEN",
        help="the token the console calls with: read rights suffice (default: none, for an open server)",
    )  # fmt: skip
    serve.add_argument(
        "--console-allow-remote", action="store_true",
        help="let --console be other than a loopback address: whoever reaches it sees what its token may read",
    )  # fmt: skip
    return serve


def apply_settings(serve: argparse.ArgumentParser, argv: list[str], parse: Any) -> argparse.Namespace:
    """Parse again with the environment's and the config file's values as the serve options' defaults."""
    first = parse(argv)
    config_path = first.config or os.environ.get("SKILLSTATE_CONFIG")
    serve.set_defaults(**layered_defaults(serve, os.environ, config_path))
    return parse(argv)  # type: ignore[no-any-return]


def run(args: argparse.Namespace) -> None:
    from skillstate.server.engine.config import EngineConfig
    from skillstate.server.rpc.app import serve

    if args.retain_revisions is not None and args.retain_revisions < 0:
        raise UsageError("--retain-revisions: must be >= 0")
    if args.max_loaded_executions < 0:
        raise UsageError("--max-loaded-executions: must be >= 0")
    from skillstate.server.errors import StorageError
    from skillstate.server.storage.backends import MEMORY, is_postgres_url

    configure_logging(args.log_level, args.log_format)
    extractor = None
    if args.extractor:
        require_extra("serve --extractor", "agents", "litellm", "pydantic")
        from pathlib import Path

        from skillstate.server.skills.llm_extract import FileCache, LlmExtractor

        beside_db = args.db != MEMORY and not is_postgres_url(args.db)  # a URL names no folder to write into
        cache_path = args.extractor_cache or (f"{args.db}.extractions.jsonl" if beside_db else None)
        extractor = LlmExtractor(args.extractor, FileCache(Path(cache_path)) if cache_path else None)
    if is_postgres_url(args.db):
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
    if not (args.lease_seconds == 0 or 0.5 <= args.lease_seconds <= 600):
        raise UsageError("--lease-seconds: must be 0 (no leases) or from 0.5 to 600 seconds")
    config = EngineConfig(
        max_loaded_executions=args.max_loaded_executions,
        retain_revisions=args.retain_revisions,
        subscriber_queue=args.subscriber_queue,
        max_watchers=args.max_watchers,
        ack_deadline=args.ack_deadline,
        progress_interval=args.progress_interval,
        max_stream_in_flight=args.max_stream_in_flight,
        lease_seconds=args.lease_seconds or None,
    )
    try:
        tls = _server_tls(args)
        alongside = _console(args, tls) if args.console else None
        asyncio.run(
            serve(
                db=args.db, listen=args.listen, config=config, extractor=extractor,
                insecure_no_auth=args.insecure_no_auth, tls=tls, in_flight_limit=args.max_in_flight,
                seats=args.seats,
                max_db_bytes=args.max_db_bytes, inline_commit_budget=inline_commit_budget,
                metrics_listen=args.metrics_listen, alongside=alongside, advertise=args.advertise,
            )
        )  # fmt: skip
    except (OSError, StorageError) as e:
        raise ServeError(str(e)) from e


def _console(args: argparse.Namespace, tls: object) -> Callable[[str], Coroutine[Any, Any, None]]:
    """The web console to run beside the server once it listens, calling it on loopback."""
    if tls is not None:
        raise UsageError("--console: not with TLS; run `skillstate console --tls-ca PEM ...` beside the server")
    require_extra("serve --console", "console", "starlette", "uvicorn")
    host, port = listen_address(args.console, args.console_allow_remote, "--console")
    from skillstate.console.main import serve_console

    def console(address: str) -> Coroutine[Any, Any, None]:
        return serve_console(address, host=host, port=port, token=args.console_token, tls=None)

    return console


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
