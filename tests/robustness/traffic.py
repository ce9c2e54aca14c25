"""A seeded robustness run: a real server process, agents writing under every merge policy (now and then
with several patches of one agent in flight at once on one base, racing each other), readers, watchers
(one of them slow), observation streams and a publisher, while faults are injected: SIGKILL and restart
of the server, calls dropped mid-flight, clients reconnecting. Everything is recorded in a History. The
session traffic (tests/robustness/sessions.py) builds on the Run here; tests/robustness/runner.py runs both.

The fault schedule and every agent's choices come from the seed; what the server answers depends on timing,
which is the point: the checks hold for every interleaving.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc

from skillstate.clients import PatchResult, SkillstateError, StateClient

from .history import OK, RACING, REJECTED, UNKNOWN, History

EXECUTION = "robust"
SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "x-merge": "counter"},
        "tags": {"type": "array", "items": {"type": "string"}, "x-merge": "set"},
        "events": {"type": "array", "items": {"type": "string"}, "x-merge": "append"},
        "inventory": {"type": "object", "additionalProperties": {"type": "string"}, "x-merge": "lww"},
        "doc": {"type": "object", "additionalProperties": {"type": "integer"}},
        "high": {"type": "integer", "x-merge": "max"},
        "low": {"type": "integer", "x-merge": "min"},
        "note": {"type": "string", "x-merge": "text"},
    },
    "required": ["count", "tags", "events", "inventory", "doc", "high", "low", "note"],
}
INITIAL = {"count": 0, "tags": [], "events": [], "inventory": {}, "doc": {}, "high": 0, "low": 1_000_000, "note": ""}
DEFINITE = {
    grpc.StatusCode.ABORTED, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED,
}  # fmt: skip
"""Statuses after which the request certainly changed nothing; any other failure leaves it unknown."""
STREAM_SUBSCRIBERS = ("obs-a", "obs-b")
SESSION_OBSERVER = "obs-session"
"""The agent whose observations, with the execution's revisions, one session receives (sessions.py)."""
SUBSCRIBERS = (*STREAM_SUBSCRIBERS, SESSION_OBSERVER)
QUEUE = 64
"""The server's per-stream queue: small, so that the slow watcher falls behind and is cut again and again."""
SMALL_WINDOW = [("grpc.http2.lookahead_bytes", 65536), ("grpc.http2.bdp_probe", 0)]
"""A fixed HTTP/2 window for the slow watcher, so the server's sends wait on it whatever gRPC would tune."""


@dataclass(frozen=True)
class RunConfig:
    seed: int
    duration: float = 10.0
    agents: int = 6
    session_agents: int = 2
    """Agents submitting through sessions besides the unary ones: alternately through the SDK and a raw stub."""
    faults: bool = True
    """SIGKILLs, dropped calls and reconnects during the traffic; without them the run still ends with a
    kill (whatever was acknowledged must survive it), which is not a fault of the traffic."""
    kill_every: tuple[float, float] = (1.0, 3.0)
    """Seconds between SIGKILLs, drawn uniformly."""
    database: str | None = None
    """A PostgreSQL URL to run on; None: a SQLite file in the work folder."""
    replicas: int = 1
    """Servers sharing the database (PostgreSQL only): each client talks to one of them, and each SIGKILL
    takes one of them down."""
    max_loaded_executions: int | None = None
    """The servers' `--max-loaded-executions` (None: their default)."""
    streams_during_traffic: bool = True
    """Whether the watches and observation streams are open while the agents run; if not, they start when
    the traffic ends and read everything back from the log. A watched execution is never unloaded: a run
    under a cap of 0 without them has its execution unloaded whenever no call is working on it."""


class ServerProcess:
    """`skillstate serve` in a subprocess, killed and restarted on the same port and database."""

    def __init__(self, db: Path | str, max_loaded_executions: int | None = None) -> None:
        self.db, self.port = db, 0
        self._options = [] if max_loaded_executions is None else ["--max-loaded-executions", str(max_loaded_executions)]
        self._process: asyncio.subprocess.Process | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        for _ in range(50):  # the port of a killed server can take a moment to be free again
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "skillstate.cli", "serve", "--db", str(self.db),
                "--listen", f"127.0.0.1:{self.port}", "--log-level", "ERROR", "--subscriber-queue", str(QUEUE),
                *self._options, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            assert self._process.stdout is not None
            line = await asyncio.wait_for(self._process.stdout.readline(), 30)
            found = re.search(rb"serving on [\d.]+:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                return
            await self._process.wait()
            await asyncio.sleep(0.1)
        raise RuntimeError(f"the server did not start on port {self.port}")

    async def kill(self) -> None:
        if self._process is not None and self._process.returncode is None:
            os.kill(self._process.pid, signal.SIGKILL)
            await self._process.wait()

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()


async def _dropped_after(seconds: float | None, call: Callable[[], Awaitable[Any]]) -> Any:
    """The call, abandoned after `seconds` if given: the client goes away while the server works on it."""
    return await (asyncio.wait_for(call(), seconds) if seconds is not None else call())


def outcome_of(error: BaseException) -> tuple[str, str]:
    if isinstance(error, SkillstateError):
        return (REJECTED if error.status in DEFINITE else UNKNOWN), error.status.name
    return UNKNOWN, type(error).__name__


class Run:
    def __init__(self, config: RunConfig, servers: list[ServerProcess]) -> None:
        self.config, self.servers = config, servers
        self.history = History()
        self.stopping = asyncio.Event()
        self.final_revision: int | None = None
        self.final_sequences: dict[str, int] | None = None
        self.watched: dict[str, list[tuple[int, str]]] = {}
        self.received: dict[str, list[tuple[int, str]]] = {}

    def client(self, replica: int = 0) -> StateClient:
        return StateClient(self.servers[replica % len(self.servers)].address, timeout=10.0)

    async def timed(self, kind: str, call: Callable[[], Awaitable[Any]], **fields: Any) -> tuple[dict[str, Any], Any]:
        entry = self.history.add(kind, start=self.history.now(), **fields)
        try:
            result = await call()
        except (SkillstateError, TimeoutError, grpc.aio.AioRpcError) as e:
            entry["outcome"], entry["status"] = outcome_of(e)
            result = None
        else:
            entry["outcome"], entry["status"] = OK, "OK"
        entry["end"] = self.history.now()
        return entry, result

    # -- agents ----------------------------------------------------------------------------------------

    async def agent(self, number: int) -> None:
        name, rng = f"agent-{number}", random.Random(f"{self.config.seed}-agent-{number}")
        client, state, revision, serial = self.client(number), dict(INITIAL), 0, 0
        try:
            while not self.stopping.is_set():
                serial += 1
                choice = rng.random()
                if choice < 0.25 or serial == 1:
                    entry, read = await self.timed("read", partial(client.get_state, EXECUTION), client=name)
                    if read is not None:
                        state, revision = read.state, read.revision
                        entry.update(revision=read.revision, hash=read.state_hash, state=read.state)
                    continue
                if choice > 0.98 and self.config.faults:  # another connection, perhaps to another replica
                    await client.close()
                    client = self.client(rng.randrange(len(self.servers)))
                    self.history.add("fault", what="reconnect", client=name, at=self.history.now())
                    continue
                if choice < 0.31:  # several patches in flight at once, all on the base last read
                    burst, racing = f"{name}-{serial}", []
                    shelf, member = f"shelf_{rng.randint(0, 9)}", f"k{rng.randint(0, 4)}"
                    first = rng.choices(RACING, [40, 35, 25])[0]  # two of one policy, then up to two of any
                    policies = [first, first, *rng.choices(RACING, k=rng.randint(0, 2))]
                    for i, policy in enumerate(policies):
                        serial += 1 if i else 0
                        patch, meta = self.racing_write(rng, policy, name, serial, state, shelf, member)
                        racing.append((f"{name}-{serial}", patch, {**meta, "burst": burst}, self.drop_after(rng)))
                    await asyncio.gather(*(self.submit(client, name, revision, *write) for write in racing))
                    continue
                patch, meta = self.write(rng, name, serial, state)
                await self.submit(client, name, revision, f"{name}-{serial}", patch, meta, self.drop_after(rng))
        finally:
            await client.close()

    def drop_after(self, rng: random.Random) -> float | None:
        """After how long the client goes away from a call, for 5% of calls when there are faults."""
        return rng.uniform(0.0, 0.02) if self.config.faults and rng.random() < 0.05 else None

    async def submit(
        self,
        client: StateClient,
        name: str,
        base: int,
        key: str,
        patch: dict[str, Any],
        meta: dict[str, Any],
        drop_after: float | None,
    ) -> None:
        call = partial(client.submit_patch, EXECUTION, patch, agent_id=name, base_revision=base, client_patch_id=key)
        entry, result = await self.timed(
            "submit", partial(_dropped_after, drop_after, call), id=key, agent=name, base=base, patch=patch, **meta
        )
        if drop_after is not None and result is None and entry["status"] == "TimeoutError":
            self.history.add("fault", what="dropped call", client=name, id=key, at=entry["end"])
        if isinstance(result, PatchResult):
            entry.update(revision=result.revision, hash=result.state_hash)

    @staticmethod
    def write(
        rng: random.Random, name: str, serial: int, state: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A patch against `state` (the agent's last read) and what the checks need to know of it."""
        element = f"{name}-{serial}"
        policy = rng.choices(
            ["counter", "set", "append", "lww", "reject", "max", "min", "text", "invalid"],
            [20, 12, 12, 12, 10, 8, 8, 12, 6],
        )[0]
        if policy == "counter":
            delta = rng.randint(1, 5)
            return {"count": state["count"] + delta}, {"policy": policy, "delta": delta}
        if policy == "set":
            return {"tags": [*state["tags"], element]}, {"policy": policy, "element": element}
        if policy == "append":
            return {"events": [*state["events"], element]}, {"policy": policy, "element": element}
        if policy == "lww":
            key = f"shelf_{rng.randint(0, 9)}"
            return {"inventory": {key: element}}, {"policy": policy, "key": key, "element": element}
        if policy == "reject":
            return {"doc": {f"k{rng.randint(0, 4)}": serial}}, {"policy": policy}
        if policy in ("max", "min"):
            value = rng.randint(0, 1_000_000)
            return {"high" if policy == "max" else "low": value}, {"policy": policy, "value": value}
        if policy == "text":  # a line of its own, inserted between two lines of the text as this agent read it
            lines = state["note"].splitlines(keepends=True)
            at = rng.randint(0, len(lines))
            return {"note": "".join([*lines[:at], f"{element}\n", *lines[at:]])}, {"policy": policy, "element": element}
        return {"count": "not a number"}, {"policy": policy}

    @staticmethod
    def racing_write(
        rng: random.Random, policy: str, name: str, serial: int, state: dict[str, Any], shelf: str, member: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One of several patches an agent has in flight at once on one base: its lww writes all go to one
        shelf (the stamps tie, so the later commit must win), its counter deltas all start from the count it
        read, and its `reject` writes all go to one doc member with different values (at most one commits; the
        others are refused ABORTED, if only for losing to a write of their own agent)."""
        element = f"{name}-{serial}"
        if policy == "lww":
            return {"inventory": {shelf: element}}, {"policy": policy, "key": shelf, "element": element}
        if policy == "counter":
            delta = rng.randint(1, 5)
            return {"count": state["count"] + delta}, {"policy": policy, "delta": delta}
        return {"doc": {member: serial}}, {"policy": policy}

    # -- streams ---------------------------------------------------------------------------------------

    async def watcher(self, name: str, slow: bool) -> None:
        """Every revision from the first, resuming by itself after a cut (a crash, or falling behind)."""
        rng = random.Random(f"{self.config.seed}-{name}")
        events = self.watched[name] = []
        self.history.add("watch", client=name, **{"from": 0}, events=events)
        address = self.servers[int(name.rsplit("-", 1)[1]) % len(self.servers)].address
        channel = grpc.aio.insecure_channel(address, options=SMALL_WINDOW if slow else None)
        async with channel, StateClient(channel=channel) as client:
            while True:
                cursor = events[-1][0] if events else 0
                try:
                    async for event in client.watch(EXECUTION, cursor, resume=False):
                        events.append((event.revision, event.state_hash))  # type: ignore[union-attr]
                        if self.final_revision is not None and event.revision >= self.final_revision:
                            return
                        if slow and not self.stopping.is_set() and rng.random() < 0.003:
                            await asyncio.sleep(0.5)  # a stall, as a busy consumer has: the server queues meanwhile
                except SkillstateError as e:
                    await self.resumed(name, e, cursor=events[-1][0] if events else 0)

    async def subscriber(self, name: str) -> None:
        received = self.received[name] = []
        self.history.add("stream", client=name, received=received)
        async with self.client(STREAM_SUBSCRIBERS.index(name) + 1) as client:
            while True:
                cursor = received[-1][0] if received else 0
                try:
                    async for observation in client.observations(EXECUTION, name, after_sequence=cursor, resume=False):
                        received.append((observation.sequence, observation.payload["id"]))  # type: ignore[index]
                        if self.final_sequences is not None and observation.sequence >= self.final_sequences[name]:
                            return
                except SkillstateError as e:
                    await self.resumed(name, e, cursor=received[-1][0] if received else 0)

    async def resumed(self, name: str, error: SkillstateError, cursor: int) -> None:
        self.history.add(
            "fault", what="stream cut", client=name, status=error.status.name, resume_from=cursor, at=self.history.now()
        )
        if error.status != grpc.StatusCode.RESOURCE_EXHAUSTED:
            await asyncio.sleep(0.05)  # the server is down: try again shortly

    def caught_up(self, kind: str, name: str) -> bool:
        """Whether a stream has everything it is due (known once the run has been read back); a session's
        observer has both its revisions and its observations."""
        if kind == "session":
            return self.caught_up("watch", name) and self.caught_up("stream", name)
        if kind == "watch":
            seen, target = self.watched[name], self.final_revision
        else:
            seen, target = self.received[name], (self.final_sequences or {}).get(name)
        return target is not None and (target == 0 or (bool(seen) and seen[-1][0] >= target))

    async def publisher(self) -> None:
        rng = random.Random(f"{self.config.seed}-publisher")
        async with self.client() as client:
            for serial in range(1, 1_000_000):
                if self.stopping.is_set():
                    return
                to = rng.choice([*SUBSCRIBERS, "*", "nobody"])
                payload = {"id": f"p{serial}", "at": serial}
                publish = partial(client.publish_observation, EXECUTION, to, payload)
                entry, sequence = await self.timed("publish", publish, id=payload["id"], to=to)
                entry["sequence"] = sequence
                await asyncio.sleep(rng.uniform(0, 0.01) if entry["outcome"] == OK else 0.05)

    # -- faults ----------------------------------------------------------------------------------------

    async def inject_faults(self) -> None:
        rng = random.Random(f"{self.config.seed}-faults")
        while True:
            try:
                await asyncio.wait_for(self.stopping.wait(), rng.uniform(*self.config.kill_every))
                return
            except TimeoutError:
                pass
            await self.crash_and_restart(rng.randrange(len(self.servers)), rng.uniform(0.05, 0.5))

    async def crash_and_restart(self, replica: int, down_for: float) -> None:
        server = self.servers[replica]
        self.history.add("fault", what="sigkill", replica=replica, at=self.history.now())
        await server.kill()
        await asyncio.sleep(down_for)
        await server.start()
        self.history.add("fault", what="restart", replica=replica, at=self.history.now())
