"""Running the console: on its own (`run_console`, what `skillstate console` calls), or inside an event loop
that runs something else too (`serve_console`, what `skillstate serve --console` runs beside the server).

uvicorn serves the app on a socket bound here (so that port 0 works and a bad address is an OSError naming
it, never uvicorn's exit), without its signal handling: whoever runs the console decides when it stops.
Stopping ends the open event streams at once, then lets running requests finish for a moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Iterator

import uvicorn

from skillstate.clients import ClientTLS

from .app import create_app
from .context import Console
from .security import is_loopback
from .upstream import Upstream

log = logging.getLogger("skillstate.console")

GRACEFUL_SHUTDOWN_SECONDS = 2
"""How long stopping waits for running requests (event streams end at once) before cutting them."""


class _Uvicorn(uvicorn.Server):
    """uvicorn, minus its signal handlers and plus a `ready` event."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class RunningConsole:
    """A console serving at `url` until `stop()`."""

    def __init__(self, server: _Uvicorn, serving: asyncio.Task[None], console: Console, url: str) -> None:
        self._server, self._serving, self._console = server, serving, console
        self.url = url

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    async def wait(self) -> None:
        """Until the console stops (it does so only when told, or when uvicorn fails: then its error)."""
        await asyncio.shield(self._serving)

    async def stop(self) -> None:
        self._console.closing.set()
        self._server.should_exit = True
        try:
            await self._serving
        finally:
            await self._console.upstream.close()


async def start_console(
    server: str, *, host: str, port: int, token: str | None, tls: ClientTLS | None
) -> RunningConsole:
    """Serve the console of the skillstate server at `server` on host:port (0: any free port), calling it
    with `token`. Raises OSError if host:port cannot be listened on."""
    listener = _bind(host, port)
    try:
        console = Console(Upstream.open(server, token=token, tls=tls))
    except BaseException:
        listener.close()
        raise
    app = create_app(console, loopback_only=is_loopback(host))
    config = uvicorn.Config(
        app, lifespan="off", log_config=None, log_level="warning", access_log=False, server_header=False,
        ws="none", proxy_headers=False, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )  # fmt: skip
    uv = _Uvicorn(config)
    serving = asyncio.create_task(uv.serve(sockets=[listener]), name="skillstate-console")
    ready = asyncio.create_task(uv.ready.wait())
    await asyncio.wait((serving, ready), return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if serving.done():  # uvicorn ended before it served: say why
        listener.close()
        await console.upstream.close()
        serving.result()
        raise OSError(f"the console stopped before it served on {host}:{port}")
    name = f"[{host}]" if ":" in host else host
    return RunningConsole(uv, serving, console, f"http://{name}:{listener.getsockname()[1]}")


async def serve_console(server: str, *, host: str, port: int, token: str | None, tls: ClientTLS | None) -> None:
    """Serve the console in the running event loop until cancelled (then stop it gracefully)."""
    console = await start_console(server, host=host, port=port, token=token, tls=tls)
    log.info("web console on %s, reading %s", console.url, server)
    try:
        await console.wait()
    finally:
        await console.stop()


def run_console(server: str, *, host: str, port: int, token: str | None, tls: ClientTLS | None) -> int:
    """Serve the console until SIGINT or SIGTERM; returns the exit code (1: host:port cannot be listened on)."""
    try:
        asyncio.run(_run(server, host, port, token, tls))
    except OSError as e:
        print(f"skillstate console: {e}", file=sys.stderr)
        return 1
    return 0


async def _run(server: str, host: str, port: int, token: str | None, tls: ClientTLS | None) -> None:
    console = await start_console(server, host=host, port=port, token=token, tls=tls)
    print(f"skillstate console: {console.url} (reading {server})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.create_task(stop.wait())
    serving = asyncio.create_task(console.wait())
    try:
        await asyncio.wait((stopping, serving), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (stopping, serving):
            task.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await console.stop()


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (port 0: any free one), so that the address it got can be printed."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listener = socket.socket(family, kind, protocol)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
    except OSError as e:
        listener.close()
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return listener
