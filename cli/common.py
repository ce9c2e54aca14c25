"""What every `skillstate` subcommand shares: its errors, exit codes and connection options (output.py prints).

Exit codes (stable, for scripts): 0 success; 1 unexpected failure; 2 usage error; 3 not found;
4 conflict (re-read and retry); 5 invalid argument; 6 failed precondition or out of range;
7 already exists; 8 server unavailable; 9 stream fell behind or a limit on concurrent use;
10 data loss; 11 unauthenticated; 12 permission denied.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Any

EXIT_BY_STATUS = {
    "NOT_FOUND": 3,
    "ABORTED": 4,
    "INVALID_ARGUMENT": 5,
    "FAILED_PRECONDITION": 6,
    "OUT_OF_RANGE": 6,
    "ALREADY_EXISTS": 7,
    "UNAVAILABLE": 8,
    "RESOURCE_EXHAUSTED": 9,
    "DATA_LOSS": 10,
    "UNAUTHENTICATED": 11,
    "PERMISSION_DENIED": 12,
}
"""The exit code of a failure with each gRPC status name (any other: 1); docs/cli.md lists them."""
DEFAULT_SERVER = "127.0.0.1:50051"


class UsageError(Exception):
    """A bad command line; exit code 2."""


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    example: str,
    parents: tuple[argparse.ArgumentParser, ...] = (),
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example of its use (one command a line)."""
    return commands.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog="example:\n" + "\n".join(f"  {line}" for line in example.strip().splitlines()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=list(parents),
    )


CONNECTION_FLAGS = ("server", "token", "tls_ca", "tls_cert", "tls_key")


def connection_options(prefix: str = "") -> argparse.ArgumentParser:
    """The parent parser of every command that calls a server: its address, bearer token and TLS files.

    The top-level parser takes them too, under `prefix`, so that they may come before the subcommand;
    resolve_connection() merges the two and fills in the defaults."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--server", dest=f"{prefix}server", metavar="HOST:PORT",
        help="host:port (default: $SKILLSTATE_SERVER or 127.0.0.1:50051)",
    )  # fmt: skip
    options.add_argument(
        "--token", dest=f"{prefix}token", metavar="TOKEN", help="bearer token (default: $SKILLSTATE_TOKEN)"
    )
    options.add_argument("--tls-ca", dest=f"{prefix}tls_ca", metavar="PEM", help="connect with TLS, trusting this CA")
    options.add_argument("--tls-cert", dest=f"{prefix}tls_cert", metavar="PEM", help="client certificate (mutual TLS)")
    options.add_argument("--tls-key", dest=f"{prefix}tls_key", metavar="PEM", help="client private key (mutual TLS)")
    if not prefix:
        options.set_defaults(connection_flags=CONNECTION_FLAGS)
    return options


def resolve_connection(args: argparse.Namespace) -> None:
    """Take connection flags given before the subcommand where the subcommand has none of its own (a flag
    after it wins), refuse them for a command that calls no server, and fill in the defaults."""
    accepted = getattr(args, "connection_flags", ())
    for name in CONNECTION_FLAGS:
        value = vars(args).pop(f"global_{name}", None)
        if value is None:
            continue
        if name not in accepted:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} does not apply to `skillstate {args.command}`")
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if accepted == CONNECTION_FLAGS:
        args.server = args.server or os.environ.get("SKILLSTATE_SERVER") or DEFAULT_SERVER
        args.token = args.token or os.environ.get("SKILLSTATE_TOKEN")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The token and TLS settings of the connection options, as client keyword arguments."""
    from skillstate.clients import ClientTLS

    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert and --tls-key go together")
    uses_tls = args.tls_ca or args.tls_cert
    try:
        tls = ClientTLS.from_files(args.tls_ca, args.tls_cert, args.tls_key) if uses_tls else None
    except OSError as e:
        raise UsageError(f"{e.filename}: {e.strerror}") from None
    return {"token": args.token or None, "tls": tls}


def listen_options(default: str, what: str) -> argparse.ArgumentParser:
    """The parent parser of a command that serves others with its token's rights: --listen, --allow-remote."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--listen", default=default, metavar="HOST:PORT", help=f"{what} (default: %(default)s)")
    options.add_argument(
        "--allow-remote", action="store_true",
        help="let --listen be other than a loopback address: whoever reaches it acts with the token's rights",
    )  # fmt: skip
    return options


def listen_address(listen: str, allow_remote: bool, option: str = "--listen") -> tuple[str, int]:
    """HOST:PORT split; UsageError if it does not parse, or names other than a loopback address without
    --allow-remote (whoever reaches it would act with the token's rights)."""
    import ipaddress

    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"{option}: expected HOST:PORT, got {listen!r}")
    if not allow_remote:
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise UsageError(
                f"{option}: {host} is not a loopback address; whoever reaches it acts with the token's rights: "
                "pass --allow-remote if that is meant"
            )
    return host, int(port)


def require_extra(what: str, extra: str, *modules: str) -> None:
    """Raise UsageError naming the pip extra to install when `what` needs a module of it that is missing."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(
            f"{what} needs {', '.join(missing)}, which the {extra!r} extra installs: pip install 'skillstate[{extra}]'"
        )
