"""What every `skillstate` subcommand shares: its errors, exit codes, JSON output and connection options.

Exit codes (stable, for scripts): 0 success; 1 unexpected failure; 2 usage error; 3 not found;
4 conflict (re-read and retry); 5 invalid argument; 6 failed precondition or out of range;
7 already exists; 8 server unavailable; 9 stream fell behind or a limit on concurrent use;
10 data loss; 11 unauthenticated; 12 permission denied.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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
DEFAULT_SERVER = os.environ.get("SKILLSTATE_SERVER", "127.0.0.1:50051")


class UsageError(Exception):
    """A bad command line; exit code 2."""


def connection_options() -> argparse.ArgumentParser:
    """The parent parser of every command that calls a server: its address, bearer token and TLS files."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--server", default=DEFAULT_SERVER, help="host:port (default: $SKILLSTATE_SERVER or %(default)s)"
    )
    options.add_argument(
        "--token", default=os.environ.get("SKILLSTATE_TOKEN"), help="bearer token (default: $SKILLSTATE_TOKEN)"
    )
    options.add_argument("--tls-ca", default=None, metavar="PEM", help="connect with TLS, trusting this CA")
    options.add_argument("--tls-cert", default=None, metavar="PEM", help="client certificate (mutual TLS)")
    options.add_argument("--tls-key", default=None, metavar="PEM", help="client private key (mutual TLS)")
    return options


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


def require_extra(what: str, extra: str, *modules: str) -> None:
    """Raise UsageError naming the pip extra to install when `what` needs a module of it that is missing."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(
            f"{what} needs {', '.join(missing)}, which the {extra!r} extra installs: pip install 'skillstate[{extra}]'"
        )


def print_json(value: Any) -> None:
    """One JSON line, flushed so that a reader of a stream sees each at once; bytes as UTF-8 text."""
    print(json.dumps(value, ensure_ascii=False, sort_keys=True, default=_encode), flush=True)


def _encode(value: object) -> object:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
