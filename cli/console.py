"""`skillstate console`: read-only web pages over a skillstate server: executions, their state and revisions
live, and the skill library (skillstate.console; docs/console.md)."""

from __future__ import annotations

import argparse

from .common import add_command, client_options, connection_options, listen_address, listen_options, require_extra
from .logs import configure_logging, logging_options


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        commands,
        "console",
        help="serve the web console of a running server",
        example="skillstate console --server 127.0.0.1:50051 --listen 127.0.0.1:8080",
        parents=(
            connection_options(),
            listen_options("127.0.0.1:8080", "where the pages are served"),
            logging_options(),
        ),
    )


def run(args: argparse.Namespace) -> int:
    require_extra("skillstate console", "console", "starlette", "uvicorn")
    host, port = listen_address(args.listen, args.allow_remote)
    from skillstate.console.main import run_console

    configure_logging(args.log_level, args.log_format)
    return run_console(args.server, host=host, port=port, **client_options(args))
