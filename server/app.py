"""Assembles the gRPC server: the state service, the skill registry, health checking and reflection on one port."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from skillstate.skills.v1 import skills_pb2
from skillstate.state.v1 import state_pb2

from .engine import EngineConfig, StateEngine
from .service import StateServicer, add_state_service
from .skills.graph import Extractor
from .skills.registry import SkillRegistry
from .skills.service import SkillRegistryServicer, add_skill_registry_service
from .skills.store import MemorySkillStore, SkillStore, SqliteSkillStore
from .storage.base import RevisionLog
from .storage.memory import MemoryRevisionLog
from .storage.sqlite import SqliteRevisionLog

log = logging.getLogger("skillstate.server")

SERVICE_NAME = state_pb2.DESCRIPTOR.services_by_name["StateService"].full_name
SKILLS_SERVICE_NAME = skills_pb2.DESCRIPTOR.services_by_name["SkillRegistryService"].full_name
DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DB = "skillstate.db"


def open_log(db: str) -> RevisionLog:
    """`:memory:` keeps everything in process; anything else is a SQLite file path."""
    return MemoryRevisionLog() if db == ":memory:" else SqliteRevisionLog(Path(db))


def open_skill_store(db: str) -> SkillStore:
    """The skill library lives in the same database as the revision log."""
    return MemorySkillStore() if db == ":memory:" else SqliteSkillStore(Path(db))


@dataclass
class RunningServer:
    """A started server; `port` is the bound port (useful with port 0)."""

    server: grpc.aio.Server
    engine: StateEngine
    registry: SkillRegistry
    port: int

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop taking calls, let running ones finish for `grace` seconds, then commit and close the log."""
        await self.server.stop(grace)
        await self.engine.close()
        await self.registry.close()


async def start_server(
    log_: RevisionLog,
    listen: str = DEFAULT_LISTEN,
    config: EngineConfig = EngineConfig(),
    skills: SkillStore | None = None,
    extractor: Extractor | None = None,
) -> RunningServer:
    """Recover the engine and the skill library and start serving on `listen` (host:port; 0 picks a port).

    Without a skill store the library lives in memory only; `extractor` replaces Sec2Graph's rule-based
    roles and contracts (server/skills/llm_extract.py).
    """
    engine = StateEngine(log_, config)
    await engine.start()
    registry = SkillRegistry(skills or MemorySkillStore(), extractor=extractor)
    try:
        await registry.start()
    except BaseException:
        await engine.close()
        raise
    size = config.limits.max_message_bytes
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", size),
            ("grpc.max_send_message_length", size),
            ("grpc.so_reuseport", 0),  # a second server on a taken port must fail, not share its traffic
        ]
    )
    add_state_service(StateServicer(engine), server)
    add_skill_registry_service(SkillRegistryServicer(registry), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (SERVICE_NAME, SKILLS_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError:
        port = 0
    if port == 0:
        await engine.close()
        await registry.close()
        raise OSError(f"cannot listen on {listen} (address in use or not available)")
    await server.start()
    for name in ("", SERVICE_NAME, SKILLS_SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, engine, registry, port)


async def serve(
    db: str = DEFAULT_DB,
    listen: str = DEFAULT_LISTEN,
    config: EngineConfig = EngineConfig(),
    extractor: Extractor | None = None,
) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully."""
    running = await start_server(open_log(db), listen, config, open_skill_store(db), extractor)
    host = listen.rsplit(":", 1)[0]
    log.info("skillstate state server listening on %s:%d (log: %s)", host, running.port, db)
    print(f"skillstate serving on {host}:{running.port} (log: {db})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await running.stop()
