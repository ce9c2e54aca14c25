"""`skillstate mcp`: run the MCP server over stdio (the client starts this process and talks on its standard
input and output) or streamable HTTP (at /mcp), on one channel to the skillstate server for its lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from skillstate.clients import ClientTLS, SkillRegistryClient, StateClient, open_channel

from .app import build_server
from .subscriptions import Feeds

GRACEFUL_SHUTDOWN_SECONDS = 5
"""How long an HTTP server that was told to stop waits for its open streams (subscriptions) to end."""
LISTEN_BACKLOG = 2048
"""Connections the kernel holds for the HTTP server before it accepts them (uvicorn's default)."""


class ListenError(Exception):
    """The HTTP address cannot be listened on."""


def run_mcp(
    server: str,
    *,
    transport: Literal["stdio", "http"],
    host: str,
    port: int,
    token: str | None,
    tls: ClientTLS | None,
) -> int:
    """Serve MCP for the skillstate server at `server` with the rights of `token`, until the client closes
    standard input (stdio) or SIGINT or SIGTERM (http); returns the exit code."""
    try:
        asyncio.run(_serve(server, transport, host, port, token, tls))
    except ListenError as e:
        print(f"skillstate mcp: {e}", file=sys.stderr)
        return 1
    return 0


async def _serve(
    target: str, transport: Literal["stdio", "http"], host: str, port: int, token: str | None, tls: ClientTLS | None
) -> None:
    channel = open_channel(target, token=token, tls=tls)
    state = StateClient(target, channel=channel)
    feeds = Feeds(state)
    try:
        app = build_server(state, SkillRegistryClient(target, channel=channel), feeds)
        if transport == "http":
            await _serve_http(app, host, port, target)
        else:
            print(f"skillstate mcp: serving {target} over stdio", file=sys.stderr, flush=True)
            await app.run_stdio_async()
    finally:
        await feeds.close()
        await channel.close()


async def _serve_http(app: MCPServer, host: str, port: int, target: str) -> None:
    import uvicorn

    listener = _bind(host, port)
    name = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        app.streamable_http_app(host=host, transport_security=_loopback_only(name)),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    url = f"http://{name}:{listener.getsockname()[1]}/mcp"
    print(f"skillstate mcp: serving {target} at {url}", file=sys.stderr, flush=True)
    with _signals_end_quietly():
        await uvicorn.Server(config).serve(sockets=[listener])


def _loopback_only(name: str) -> TransportSecuritySettings | None:
    """On a loopback address, requests must name a loopback host (and come from a loopback origin, if from a
    page): a web page cannot reach the server through DNS rebinding. The SDK does this for three spellings of
    loopback only; this covers any (127.0.0.2, ...). None (no check) for an address --allow-remote let through."""
    host = name.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    hosts = sorted({f"{name}:*", "127.0.0.1:*", "localhost:*", "[::1]:*"})
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts])


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (port 0: any free one), so that the address it got can be printed."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listener = socket.socket(family, kind, protocol)
    except OSError as e:
        raise ListenError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(LISTEN_BACKLOG)  # connections wait from now on, not refused until uvicorn starts
    except OSError as e:
        listener.close()
        raise ListenError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return listener


@contextlib.contextmanager
def _signals_end_quietly() -> Iterator[None]:
    """uvicorn stops gracefully on SIGINT or SIGTERM and then raises the signal again for the handler it found
    installed; with these, that second delivery does nothing and serving simply returns (exit code 0)."""
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
