"""`skillstate mcp`: an MCP server that makes any MCP client an agent of a skillstate server, with the
identity and rights of the token it is given (skillstate.mcp_server; docs/mcp.md)."""

from __future__ import annotations

import argparse

from .common import add_command, client_options, connection_options, listen_address, listen_options, require_extra
from .logs import configure_logging, logging_options

TRANSPORTS = ("stdio", "http")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = add_command(
        commands,
        "mcp",
        help="serve the state service and skill registry to MCP clients",
        example='skillstate mcp --server 127.0.0.1:50051 --token "$SKILLSTATE_TOKEN"\n'
        "skillstate mcp --transport http --listen 127.0.0.1:8765",
        parents=(
            connection_options(),
            listen_options("127.0.0.1:8765", "where --transport http listens"),
            logging_options(),
        ),
    )
    mcp.add_argument(
        "--transport", choices=TRANSPORTS, default="stdio",
        help="stdio (the client starts this command) or http (streamable HTTP at /mcp; default: %(default)s)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    require_extra("skillstate mcp", "mcp", "mcp")
    host, port = listen_address(args.listen, args.allow_remote) if args.transport == "http" else ("", 0)
    from skillstate.mcp_server.main import run_mcp

    configure_logging(args.log_level, args.log_format)  # to standard error: stdio's standard output is the protocol
    return run_mcp(args.server, transport=args.transport, host=host, port=port, **client_options(args))
