"""One seeded robustness run: a fresh database, the servers, the streams, then the traffic (unary agents,
session agents, the publisher and the faults) for the configured time, one more SIGKILL, the log and state
read back, and every stream run until it has caught up."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from .history import FAULTS, OK, History, faults_in_traffic, same_agent_races
from .sessions import SessionRun
from .traffic import (
    EXECUTION,
    INITIAL,
    SCHEMA,
    SESSION_OBSERVER,
    STREAM_SUBSCRIBERS,
    SUBSCRIBERS,
    RunConfig,
    ServerProcess,
)


async def run(config: RunConfig, workdir: Path) -> tuple[History, dict[str, int]]:
    """One seeded run against a fresh database in workdir; the History ends with what was read back."""
    if config.replicas > 1 and config.database is None:
        raise ValueError("replicas share a PostgreSQL database: give RunConfig.database")
    database = config.database or workdir / f"robust-{config.seed}.db"
    servers = [ServerProcess(database, config.max_loaded_executions) for _ in range(config.replicas)]
    for server in servers:
        await server.start()
    this = SessionRun(config, servers)
    streams: dict[tuple[str, str], asyncio.Task[None]] = {}
    workers: list[asyncio.Task[None]] = []
    try:
        async with this.client() as client:
            created = await client.create_execution(EXECUTION, schema=SCHEMA, initial_state=INITIAL)
        this.history.add("created", initial=INITIAL, hash=created.state_hash, seed=config.seed)
        if config.streams_during_traffic:
            streams = open_streams(this)
            await asyncio.sleep(0.2)  # streams are open before the first write
        traffic = this.history.add("traffic", start=this.history.now())
        workers = [asyncio.create_task(this.agent(n)) for n in range(config.agents)]
        sessions = range(config.agents, config.agents + config.session_agents)
        workers.extend(asyncio.create_task(this.session_agent(n)) for n in sessions)
        workers.append(asyncio.create_task(this.publisher()))
        if config.faults:
            workers.append(asyncio.create_task(this.inject_faults()))
        await asyncio.sleep(config.duration)
        this.stopping.set()
        traffic["end"] = this.history.now()
        await asyncio.wait_for(asyncio.gather(*workers), 60)
        if not config.streams_during_traffic:
            streams = open_streams(this)
        await this.crash_and_restart(0, 0.1)  # whatever was acknowledged must survive one more crash
        await read_back(this)
        for _ in range(1200):  # every stream catches up, or the check reports how far it got
            pending = [task for key, task in streams.items() if not task.done() and not this.caught_up(*key)]
            if not pending:
                break
            await asyncio.sleep(0.1)
        for task in streams.values():
            if not task.done():
                task.cancel()
        await asyncio.gather(*streams.values(), return_exceptions=True)
    finally:
        for task in [*workers, *streams.values()]:
            task.cancel()
        for server in servers:
            with contextlib.suppress(Exception):
                await server.stop()
    return this.history, counted(this.history, this.final_revision or 0)


def open_streams(this: SessionRun) -> dict[tuple[str, str], asyncio.Task[None]]:
    """The watchers, observation subscribers and the session observer, each resuming by itself after a cut."""
    streams = {("watch", f"watch-{i}"): asyncio.create_task(this.watcher(f"watch-{i}", slow=i == 2)) for i in range(3)}
    for name in STREAM_SUBSCRIBERS:
        streams["stream", name] = asyncio.create_task(this.subscriber(name))
    streams["session", SESSION_OBSERVER] = asyncio.create_task(this.session_observer())
    return streams


def counted(history: History, revisions: int) -> dict[str, int]:
    """What a run did: requests, acknowledged writes (and of them, through sessions), revisions, faults in
    the traffic, same-agent races, the raw session submits sent again after a drop, and the session submits
    answered as a duplicate (sent again, by the SDK or the raw agent, after they had committed)."""
    faults = faults_in_traffic(history)
    counts = {what.replace(" ", "_"): faults[what] for what in (*FAULTS, "slow watcher cut")}
    submits = history.of("submit")
    through_sessions = [s for s in submits if "via" in s]
    counts.update(
        requests=sum(1 for e in history.entries if e["kind"] in ("submit", "read", "publish")),
        acknowledged_writes=sum(1 for s in submits if s["outcome"] == OK),
        session_writes=sum(1 for s in through_sessions if s["outcome"] == OK),
        revisions=revisions,
        resubmitted=sum(1 for s in through_sessions if s.get("sends", 0) > 1),
        duplicates=sum(1 for s in through_sessions if s["outcome"] == OK and s["duplicate"]),
    )
    counts.update({f"raced_{policy}": n for policy, n in same_agent_races(history).items()})
    return counts


async def read_back(this: SessionRun) -> None:
    """The log and the state as the server holds them now, and where each stream should end."""
    async with this.client() as client:
        log = [
            {
                "revision": e.revision, "agent_id": e.agent_id, "base_revision": e.base_revision,
                "applied_patch": e.applied_patch, "state_hash": e.state_hash, "client_patch_id": e.client_patch_id,
            }
            async for e in client.history(EXECUTION)
        ]  # fmt: skip
        final = await client.get_state(EXECUTION)
    this.history.add("final_log", revisions=log)
    this.history.add("final_state", revision=final.revision, state=final.state, hash=final.state_hash)
    acked = [p for p in this.history.of("publish") if p["outcome"] == OK]
    this.final_sequences = {
        name: max((p["sequence"] for p in acked if p["to"] in (name, "*")), default=0) for name in SUBSCRIBERS
    }
    this.final_revision = final.revision
