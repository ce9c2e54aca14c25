"""What keeps the console's pages to the people meant to see them, beside listening on loopback.

Whoever reaches the port reads what the console's token may read. On loopback that is this machine's
users, unless a web page in one of their browsers gets its scripts to the port: a page on another site
cannot read the console's answers (no CORS headers are sent), and its own host name rebound to 127.0.0.1
(DNS rebinding) is refused by the Host check. The hydrate POST takes only application/json, which a page on
another site cannot send without a CORS preflight that fails. Every response also carries a
Content-Security-Policy that lets the pages load scripts, styles and data from the console alone.
"""

from __future__ import annotations

import ipaddress

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import error_body
from .shapes import JSONResponse

HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
     b"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]  # fmt: skip


class Hardened:
    """ASGI middleware: the security headers on every response, and, when `loopback_only`, a 421 for a
    request whose Host is not a loopback name."""

    def __init__(self, app: ASGIApp, *, loopback_only: bool) -> None:
        self.app, self.loopback_only = app, loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        host = Headers(scope=scope).get("host", "")
        if self.loopback_only and not is_loopback(_name(host)):
            refusal = error_body("PERMISSION_DENIED", f"Host {host[:100]!r}: the console answers loopback names only")
            await JSONResponse(refusal, 421)(scope, receive, send_hardened)
            return
        await self.app(scope, receive, send_hardened)


def is_loopback(host: str) -> bool:
    """localhost or a loopback address literal (127.0.0.2 too, [::1] with or without brackets): never a name
    a DNS answer could rebind."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _name(host: str) -> str:
    """The host name of a Host header, without its port (`[::1]:8080` is `[::1]`)."""
    return host if host.endswith("]") else host.rsplit(":", 1)[0]
