"""Assembles the gRPC server: the state service, the skill registry, health checking and reflection on one port."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from skillstate.skills.v1 import skills_pb2
from skillstate.state.v1 import state_pb2

from ..auth.fairness import DEFAULT_SEATS
from ..auth.guard import DEFAULT_IN_FLIGHT, Guard, Mode
from ..engine.config import EngineConfig
from ..engine.state_engine import StateEngine
from ..metrics import NO_METRICS, LoopLagProbe, Metrics, PrometheusMetrics
from ..skills.graph import Extractor
from ..skills.registry import SkillRegistry
from ..storage.backends import open_credential_store, open_log, open_skill_store
from ..storage.credential_store.base import CredentialStore
from ..storage.credential_store.memory import MemoryCredentialStore
from ..storage.redact import redact
from ..storage.revision_log.base import RevisionLog
from ..storage.skill_store.base import SkillStore
from ..storage.skill_store.memory import MemorySkillStore
from ..storage.sqlite_writer import INLINE_BUDGET
from .forwarding import Forwarder
from .skills_service import SkillRegistryServicer, add_skill_registry_service
from .state_service import StateServicer, add_state_service

log = logging.getLogger("skillstate.server")

SERVICE_NAME = state_pb2.DESCRIPTOR.services_by_name["StateService"].full_name
SKILLS_SERVICE_NAME = skills_pb2.DESCRIPTOR.services_by_name["SkillRegistryService"].full_name
DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DB = "skillstate.db"
SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the GIL while another waits for it (CPython's default is 0.005). Heavy work
runs in worker threads; the event loop, which serves every call, then waits at most this long for each of
its turns, instead of adding 5 ms to every step of every call while a worker runs Python."""
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 60_000),  # ping a connection after a minute without traffic (calls or not) ...
    ("grpc.keepalive_timeout_ms", 20_000),  # ... and close it if the ping is not answered in 20 s: a dead peer
    ("grpc.keepalive_permit_without_calls", 1),  # idle connections too, and clients may ping them
    ("grpc.http2.max_pings_without_data", 0),  # keep pinging a connection that carries no data
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),  # a client may ping every 10 s (the SDK: 30 s)
)
"""The server's keepalive policy (docs/limits.md): a client that pings more often than every 10 s while the
server sends nothing is sent GOAWAY `too_many_pings` after two strikes (gRPC's default `max_ping_strikes`)."""
HEALTH_NAMES = ("", SERVICE_NAME, SKILLS_SERVICE_NAME)


@dataclass(frozen=True)
class ServerTLS:
    """The server's certificate chain and key (PEM); with `client_ca`, clients must present a certificate
    it signed (mutual TLS)."""

    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path, client_ca: str | Path | None = None) -> ServerTLS:
        return cls(Path(cert).read_bytes(), Path(key).read_bytes(), Path(client_ca).read_bytes() if client_ca else None)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def is_loopback(listen: str) -> bool:
    """Whether a host:port listens on the loopback interface only."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_mode(listen: str, insecure_no_auth: bool = False) -> Mode:
    """Open on loopback until a credential is issued; elsewhere only with the explicit opt-out."""
    if insecure_no_auth:
        return Mode.OPEN
    return Mode.AUTO if is_loopback(listen) else Mode.REQUIRED


class ServingHealth:
    """The grpc.health.v1 status of the server and its services: SERVING while it takes calls and its log
    commits; NOT_SERVING from a failed commit until one succeeds again, and for good once `stop` begins. The
    skill registry's name is NOT_SERVING too until its library is loaded (its calls wait until then: 25 s at
    10,000 skills), and stays so if loading failed."""

    def __init__(self) -> None:
        self.servicer = health.aio.HealthServicer()
        self._storage_ok = True
        self._library_ready = False
        self._updating: asyncio.Task[None] | None = None
        self._loading: asyncio.Task[None] | None = None

    async def serve(self, registry: SkillRegistry) -> None:
        await self._set(self._storage_ok, self._library_ready)
        self._loading = asyncio.create_task(self._follow_library(registry), name="skillstate-health-library")

    def storage(self, ok: bool) -> None:
        """The engine's storage-health hook (called on the loop, between awaits): the latest call wins."""
        self._storage_ok = ok
        self._changed()

    async def shutdown(self) -> None:
        """NOT_SERVING for every name, never SERVING again: load balancers stop sending before calls are refused."""
        for task in (self._updating, self._loading):
            if task is not None:
                task.cancel()
        await self.servicer.enter_graceful_shutdown()

    async def library_loaded(self) -> bool:
        """Wait until the skill library has loaded, or failed to, and the statuses say so; whether it loaded."""
        # waited on, not awaited: a caller cancelled must not cancel them, nor a stop that cancels them the caller
        if self._loading is not None:
            await asyncio.wait([self._loading])
        if self._updating is not None:  # (read after: loading may have started an update)
            await asyncio.wait([self._updating])
        return self._library_ready

    async def _follow_library(self, registry: SkillRegistry) -> None:
        try:
            await registry.ready()
        except Exception:
            log.error("the skill library did not load: the skill registry reports NOT_SERVING", exc_info=True)
            return
        self._library_ready = True
        self._changed()

    def _changed(self) -> None:
        if self._updating is None or self._updating.done():
            self._updating = asyncio.create_task(self._follow(), name="skillstate-health")

    async def _follow(self) -> None:
        applied = None
        while applied != (wanted := (self._storage_ok, self._library_ready)):
            applied = wanted
            await self._set(*wanted)

    async def _set(self, storage_ok: bool, library_ready: bool) -> None:
        for name in HEALTH_NAMES:
            serving = storage_ok and (library_ready or name != SKILLS_SERVICE_NAME)
            status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
            await self.servicer.set(name, status)


@dataclass
class RunningServer:
    """A started server; `port` is the bound port (useful with port 0)."""

    server: grpc.aio.Server
    engine: StateEngine
    registry: SkillRegistry
    port: int
    guard: Guard
    credentials: CredentialStore
    metrics_http: Any = None
    """The /metrics HTTP server, when there is one."""
    lag_probe: LoopLagProbe | None = None
    health: ServingHealth | None = None
    forwarder: Forwarder | None = None

    @property
    def metrics_port(self) -> int | None:
        return int(self.metrics_http.server_port) if self.metrics_http is not None else None

    async def stop(self, grace: float | None = 1.0) -> None:
        """Report NOT_SERVING, stop taking calls, let running ones finish for `grace` seconds, then commit and
        close the log."""
        if self.health is not None:
            await self.health.shutdown()
        if self.metrics_http is not None:
            self.metrics_http.shutdown()
            self.metrics_http.server_close()
        if self.lag_probe is not None:
            await self.lag_probe.stop()
        await self.server.stop(grace)
        if self.forwarder is not None:
            await self.forwarder.close()
        await self.engine.close()
        await self.registry.close()
        await self.credentials.close()


async def start_server(
    log_: RevisionLog,
    listen: str = DEFAULT_LISTEN,
    config: EngineConfig = EngineConfig(),
    skills: SkillStore | None = None,
    extractor: Extractor | None = None,
    *,
    credentials: CredentialStore | None = None,
    auth: Mode | None = None,
    tls: ServerTLS | None = None,
    in_flight_limit: int = DEFAULT_IN_FLIGHT,
    seats: int = DEFAULT_SEATS,
    metrics_listen: str | None = None,
    grpc_options: Sequence[tuple[str, Any]] = (),
    advertise: str | None = None,
) -> RunningServer:
    """Recover the engine and the skill library and start serving on `listen` (host:port; 0 picks a port).

    Without a skill store the library lives in memory only, and so do credentials without a credential
    store; `auth` defaults to `auth_mode(listen)`. `extractor` replaces Sec2Graph's rule-based roles and
    contracts (server/skills/llm_extract.py). `metrics_listen` (host:port) serves Prometheus metrics.
    `grpc_options` are gRPC server options that replace the defaults of the same name (KEEPALIVE_OPTIONS).
    `advertise` (host:port) is where other replicas of a shared log forward calls for the executions this
    one owns; by default the address it listens on (loopback for a wildcard).
    """
    credentials = credentials or MemoryCredentialStore()
    guard = Guard(credentials, auth or auth_mode(listen), in_flight_limit=in_flight_limit, seats=seats)
    prometheus = PrometheusMetrics() if metrics_listen else None
    metrics: Metrics = prometheus or NO_METRICS
    engine = StateEngine(log_, config, metrics)
    registry = SkillRegistry(skills or MemorySkillStore(), extractor=extractor)
    async with contextlib.AsyncExitStack() as undo:  # what started is closed again if a later step fails
        await credentials.open()
        undo.push_async_callback(credentials.close)
        await engine.start()
        undo.push_async_callback(engine.close)
        await registry.start()
        undo.push_async_callback(registry.close)
        forwarder = _forwarder(engine, config, tls, metrics)
        server, port, serving = await _serve_grpc(
            engine, registry, guard, metrics, listen, config, tls, grpc_options, forwarder, advertise
        )
        undo.pop_all()
    http = probe = None
    if prometheus and metrics_listen:
        http, probe = prometheus.serve(metrics_listen), LoopLagProbe(prometheus)
        probe.start()
    return RunningServer(server, engine, registry, port, guard, credentials, http, probe, serving, forwarder)


def _forwarder(engine: StateEngine, config: EngineConfig, tls: ServerTLS | None, metrics: Metrics) -> Forwarder | None:
    """Replicas with leases forward calls to each other, over TLS when they serve TLS. A forwarded unary call
    asks every lease's length whether its owner stalled past its lease (then this replica takes it over)."""
    if engine.replica_id is None:
        return None
    patience = config.lease_seconds or 0.0
    return Forwarder(engine.replica_id, engine.owns, patience, _peer_credentials(tls) if tls else None, metrics)


def _peer_credentials(tls: ServerTLS) -> grpc.ChannelCredentials:
    """How a replica calls another over TLS: presenting its own certificate (a client certificate where the
    others ask for one) and trusting the CA that signs clients' certificates, else the system's roots."""
    return grpc.ssl_channel_credentials(tls.client_ca, tls.private_key, tls.cert_chain)


async def _serve_grpc(
    engine: StateEngine,
    registry: SkillRegistry,
    guard: Guard,
    metrics: Metrics,
    listen: str,
    config: EngineConfig,
    tls: ServerTLS | None,
    grpc_options: Sequence[tuple[str, Any]],
    forwarder: Forwarder | None,
    advertise: str | None,
) -> tuple[grpc.aio.Server, int, ServingHealth]:
    size = config.limits.max_message_bytes
    options = {
        "grpc.max_receive_message_length": size,
        "grpc.max_send_message_length": size,
        "grpc.so_reuseport": 0,  # a second server on a taken port must fail, not share its traffic
        **dict(KEEPALIVE_OPTIONS),
        **dict(grpc_options),
    }
    server = grpc.aio.server(options=list(options.items()))
    add_state_service(StateServicer(engine, guard, config, metrics, forwarder), server, guard, metrics)
    skills = SkillRegistryServicer(registry, metrics, config.limits.max_message_bytes)
    add_skill_registry_service(skills, server, guard, metrics)
    serving = ServingHealth()
    health_pb2_grpc.add_HealthServicer_to_server(serving.servicer, server)
    names = (SERVICE_NAME, SKILLS_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    try:
        port = server.add_secure_port(listen, tls.credentials()) if tls else server.add_insecure_port(listen)
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {listen} (address in use or not available)")
    # known to the other replicas before any call can make this one an owner
    await engine.advertise(advertise or f"{_dialable(listen.rsplit(':', 1)[0])}:{port}")
    await server.start()
    await serving.serve(registry)
    engine.on_storage_health(serving.storage)
    return server, port, serving


async def serve(
    db: str = DEFAULT_DB,
    listen: str = DEFAULT_LISTEN,
    config: EngineConfig = EngineConfig(),
    extractor: Extractor | None = None,
    *,
    insecure_no_auth: bool = False,
    tls: ServerTLS | None = None,
    in_flight_limit: int = DEFAULT_IN_FLIGHT,
    seats: int = DEFAULT_SEATS,
    max_db_bytes: int | None = None,
    inline_commit_budget: float = INLINE_BUDGET,
    metrics_listen: str | None = None,
    alongside: Callable[[str], Coroutine[Any, Any, None]] | None = None,
    advertise: str | None = None,
) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully. `alongside`, given the address to call this server
    at, runs beside it (the web console) from when it listens until it stops; if it fails, the server stops too
    and its error is raised."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    running = await start_server(
        open_log(db, max_db_bytes, inline_commit_budget), listen, config, open_skill_store(db), extractor,
        credentials=open_credential_store(db), auth=auth_mode(listen, insecure_no_auth), tls=tls,
        in_flight_limit=in_flight_limit, seats=seats, metrics_listen=metrics_listen, advertise=advertise,
    )  # fmt: skip
    host = listen.rsplit(":", 1)[0]
    scheme = "TLS" + (" with client certificates" if tls and tls.client_ca else "") if tls else "plaintext"
    where = redact(db)
    log.info("skillstate state server listening on %s:%d (log: %s, %s)", host, running.port, where, scheme)
    await _say_how_calls_are_admitted(running.guard)
    if running.engine.replica_id is not None and advertise is None and _dialable(host) != host:
        log.warning(
            "replicas on one database forward calls to this one at %s:%d; on several hosts, give each "
            "--advertise HOST:PORT", _dialable(host), running.port,
        )  # fmt: skip
    if metrics_listen is not None:
        log.info("Prometheus metrics on http://%s:%s/metrics", metrics_listen.rpartition(":")[0], running.metrics_port)
    print(f"skillstate serving on {host}:{running.port} (log: {where}, {scheme})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    beside = asyncio.create_task(alongside(f"{_dialable(host)}:{running.port}")) if alongside else None
    try:
        await _until_stopped(stop, beside)
    finally:
        log.info("shutting down")
        await running.stop()


async def _until_stopped(stop: asyncio.Event, beside: asyncio.Task[None] | None) -> None:
    """Wait for a signal, or for what runs beside the server to end (its error raised); then cancel it."""
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({stopping} | ({beside} if beside else set()), return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if beside is None:
        return
    if beside.done():
        beside.result()
        return
    beside.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await beside


def _dialable(host: str) -> str:
    """The host to call a server listening on `host` at: loopback for a wildcard address."""
    return {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}.get(host, host)


async def _say_how_calls_are_admitted(guard: Guard) -> None:
    if guard.mode is Mode.OPEN:
        log.warning("authentication is OFF (--insecure-no-auth): any client may read and write every execution")
    elif await guard.is_open():
        log.warning(
            "serving without authentication: loopback only and no credential issued yet "
            "(`skillstate auth issue` turns it on)"
        )
    else:
        log.info("every call needs a credential (authorization: Bearer <token>)")
