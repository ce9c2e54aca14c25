# PYTHON_ARGCOMPLETE_OK
"""The `skillstate` command. Each subcommand imports what it needs only when it runs; what they share,
exit codes included, is in common.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from .common import EXIT_BY_STATUS, UsageError, add_command, connection_options, require_extra, resolve_connection

EXAMPLE = """example:
  skillstate serve
  skillstate state list -o table
  skillstate --server 10.0.0.5:50051 --token "$TOKEN" state get order-1"""
SHELLS = ("bash", "zsh", "fish")


def build_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command's parser, and its `serve` subcommand's (whose defaults the settings layer sets)."""
    parser = argparse.ArgumentParser(
        prog="skillstate",
        description="Shared execution state for LLM agents. Connection flags (--server, --token, --tls-*) go "
        "before or after the subcommand.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[connection_options(prefix="global_")],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from . import auth, console, mcp, serve, sim, skills, state, work

    serve_parser = serve.add_parser(commands)
    state.add_parser(commands)
    skills.add_parser(commands)
    sim.add_parsers(commands)
    auth.add_parser(commands)
    mcp.add_parser(commands)
    console.add_parser(commands)
    work.add_parser(commands)
    completion = add_command(
        commands, "completion", help="print the shell completion script",
        example='eval "$(skillstate completion bash)"    # in ~/.bashrc; zsh and fish alike',
    )  # fmt: skip
    completion.add_argument("shell", choices=SHELLS)
    return parser, serve_parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line: shell completion if a shell asks for it, settings under `serve`'s flags, and
    connection flags from before the subcommand."""
    parser, serve_parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(parser)
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(arguments)
    if args.command == "serve":
        from .serve import apply_settings

        args = apply_settings(serve_parser, arguments, parser.parse_args)
    resolve_connection(args)
    return args


def _completion(shell: str) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode(["skillstate"], shell=shell), end="")
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillstate")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
        return _run(args)
    except UsageError as e:
        print(f"skillstate: {e}", file=sys.stderr)
        return 2
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


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        from .serve import ServeError, run

        try:
            run(args)
        except ServeError as e:
            print(f"skillstate serve: {e}", file=sys.stderr)
            return 1
    elif args.command == "state":
        from . import state

        asyncio.run(state.run(args))
    elif args.command == "skills":
        from . import skills

        return asyncio.run(skills.run(args))
    elif args.command == "auth":
        from . import auth

        return asyncio.run(auth.run(args))
    elif args.command == "mcp":
        from . import mcp

        return mcp.run(args)
    elif args.command == "console":
        from . import console

        return console.run(args)
    elif args.command == "completion":
        return _completion(args.shell)
    elif args.command in ("sim", "demo"):
        require_extra(f"skillstate {args.command}", "agents", "litellm", "scipy")
        require_extra(f"skillstate {args.command}", "plots", "matplotlib")
        from . import sim

        return asyncio.run(sim.run(args))
    elif args.command == "work":
        require_extra("skillstate work", "agents", "litellm")
        from . import work

        return work.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
