"""Session traffic beside the unary agents: agents that submit through Session streams, several submits in
flight on one stream, all on the base last read; and an observer that receives observations and revisions
over one session.

- The SDK agent uses `StateClient.session`, which reopens a stream cut by a crash and sends the unanswered
  submits again under their idempotency keys.
- The raw agent drives the stub itself: it drops 10% of its streams mid-flight, SIGKILL cuts others, and it
  sends what was left unanswered again, under the same idempotency keys, on its next stream, beside new
  submits.
- The observer's SDK session resumes observations and revisions by itself after every crash.

Each submit is a `submit` entry as a unary one is (`via` says how it went), so the model holds it to the same
guarantees; each stream is a `session` entry: the ids of its submits in the order sent, and of its answers
in the order they came back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
from collections.abc import Coroutine, Iterator
from functools import partial
from typing import Any

import grpc

from skillstate.clients import PatchResult, Session, SkillstateError, StateClient, open_channel
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from .history import OK, RACING, REJECTED, UNKNOWN
from .traffic import DEFINITE, EXECUTION, SESSION_OBSERVER, STREAM_SUBSCRIBERS, Run

UNANSWERED = "UNANSWERED"
"""The status of a raw submit no stream has answered yet."""
STATUSES = {code.value[0]: code for code in grpc.StatusCode}
"""A google.rpc.Status code (a refused submit's error) as the gRPC status it is."""


class SessionRun(Run):
    """A run whose traffic has session agents too (numbered after the unary ones: even numbers through the
    SDK, odd ones through the raw stub) and the observer."""

    def session_agent(self, number: int) -> Coroutine[Any, Any, None]:
        return (self.raw_session_agent if number % 2 else self.sdk_session_agent)(number)

    def plan(self, rng: random.Random, name: str, serial: int, state: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        """The submits of one burst, all on the base of `state`: 2-6 independent writes of any kind, or
        (40%) a same-agent race as the unary agents send, two of one racing policy and up to two of any."""
        if rng.random() < 0.4:
            shelf, member = f"shelf_{rng.randint(0, 9)}", f"k{rng.randint(0, 4)}"
            first = rng.choices(RACING, [40, 35, 25])[0]
            burst, writes = f"{name}-{serial}", []
            for i, policy in enumerate([first, first, *rng.choices(RACING, k=rng.randint(0, 2))]):
                patch, meta = self.racing_write(rng, policy, name, serial + i, state, shelf, member)
                writes.append((f"{name}-{serial + i}", patch, {**meta, "burst": burst}))
            return writes
        return [(f"{name}-{serial + i}", *self.write(rng, name, serial + i, state)) for i in range(rng.randint(2, 6))]

    # -- through the SDK -------------------------------------------------------------------------------

    async def sdk_session_agent(self, number: int) -> None:
        """Opens a session, sends 1-4 bursts on it (re-reading the state between them), and opens another."""
        name, rng = f"agent-{number}", random.Random(f"{self.config.seed}-agent-{number}")
        client, serial, streams = self.client(number), 0, itertools.count(1)
        try:
            while not self.stopping.is_set():
                bursts = rng.randint(1, 4)
                record = self.history.add("session", client=name, via="sdk", stream=next(streams), sent=[], answered=[])
                try:
                    async with client.session(EXECUTION, agent_id=name) as session:
                        for _ in range(bursts):
                            entry, read = await self.timed("read", partial(client.get_state, EXECUTION), client=name)
                            if read is None:
                                break
                            entry.update(revision=read.revision, hash=read.state_hash, state=read.state)
                            if self.stopping.is_set():
                                break
                            writes = self.plan(rng, name, serial + 1, read.state)
                            serial += len(writes)
                            answers = await asyncio.gather(
                                *(self.sdk_submit(session, record, name, read.revision, *write) for write in writes)
                            )
                            if UNKNOWN in answers:
                                break  # the session is over (it gave up reopening): open another
                except SkillstateError as e:  # it could not be opened
                    record["failed"] = e.status.name
                    await asyncio.sleep(0.05)
        finally:
            await client.close()

    async def sdk_submit(
        self, session: Session, record: dict[str, Any], name: str, base: int, key: str, patch: Any, meta: Any
    ) -> str:
        record["sent"].append(key)
        call = partial(session.submit, patch, base_revision=base, client_patch_id=key)
        entry, result = await self.timed(
            "submit", call, id=key, agent=name, base=base, patch=patch, via="session", **meta
        )
        record["answered"].append(key)
        if isinstance(result, PatchResult):
            entry.update(revision=result.revision, hash=result.state_hash, duplicate=result.duplicate)
        return str(entry["outcome"])

    # -- through the raw stub --------------------------------------------------------------------------

    async def raw_session_agent(self, number: int) -> None:
        """A stream per burst: the submits a dropped or cut stream left unanswered, then the new ones. When the
        traffic stops, what is still unanswered is sent again until answered, for up to 5 s."""
        name, rng = f"agent-{number}", random.Random(f"{self.config.seed}-agent-{number}")
        channel = open_channel(self.servers[number % len(self.servers)].address)
        stub, client = pb_grpc.StateServiceStub(channel), StateClient(channel=channel, timeout=10.0)
        sequences, streams = itertools.count(1), itertools.count(1)
        unanswered: list[dict[str, Any]] = []
        serial = 0
        try:
            while not self.stopping.is_set():
                drop_after = rng.uniform(0.0, 0.02) if self.config.faults and rng.random() < 0.1 else None
                entry, read = await self.timed("read", partial(client.get_state, EXECUTION), client=name)
                if read is None:
                    await asyncio.sleep(0.05)
                    continue
                entry.update(revision=read.revision, hash=read.state_hash, state=read.state)
                writes = self.plan(rng, name, serial + 1, read.state)
                serial += len(writes)
                submits = [*unanswered, *(self.raw_submit(name, read.revision, *write) for write in writes)]
                unanswered = await self.raw_stream(stub, name, next(streams), sequences, submits, drop_after)
            for _ in range(50):
                if not unanswered:
                    break
                unanswered = await self.raw_stream(stub, name, next(streams), sequences, unanswered, None)
                await asyncio.sleep(0.1 if unanswered else 0)
            for submit in unanswered:
                submit["end"] = self.history.now()  # never answered: its outcome stays unknown
        finally:
            await channel.close()

    def raw_submit(self, name: str, base: int, key: str, patch: Any, meta: Any) -> dict[str, Any]:
        return self.history.add(
            "submit", id=key, agent=name, base=base, patch=patch, via="raw session", **meta,
            start=self.history.now(), outcome=UNKNOWN, status=UNANSWERED, sends=0,
        )  # fmt: skip

    async def raw_stream(
        self,
        stub: pb_grpc.StateServiceStub,
        name: str,
        number: int,
        sequences: Iterator[int],
        submits: list[dict[str, Any]],
        drop_after: float | None,
    ) -> list[dict[str, Any]]:
        """One stream: the open, every submit pipelined, the half-close, then the results until the stream
        ends, or until it is dropped `drop_after` seconds in. Returns the submits left unanswered."""
        record = self.history.add("session", client=name, via="raw", stream=number, sent=[], answered=[])
        by_sequence: dict[int, dict[str, Any]] = {}
        call = stub.Session(timeout=10.0)

        async def write() -> None:
            await call.write(pb.SessionRequest(open=pb.SessionOpen(execution_id=EXECUTION, agent_id=name)))
            for submit in submits:
                sequence = next(sequences)
                by_sequence[sequence] = submit
                record["sent"].append(submit["id"])
                if not submit["sends"]:
                    submit["start"] = self.history.now()
                submit["sends"] += 1
                request = pb.SubmitPatchRequest(
                    base_revision=submit["base"], patch_json=json.dumps(submit["patch"]), client_patch_id=submit["id"]
                )
                await call.write(pb.SessionRequest(submit=pb.SessionSubmit(sequence=sequence, patch=request)))
            await call.done_writing()

        async def relay() -> None:
            writer = asyncio.create_task(write())
            try:
                while (message := await call.read()) is not grpc.aio.EOF:
                    if message.WhichOneof("kind") == "result":
                        self.raw_answer(record, by_sequence.get(message.result.sequence), message.result)
            finally:
                writer.cancel()
                with contextlib.suppress(asyncio.CancelledError, asyncio.InvalidStateError, grpc.aio.AioRpcError):
                    await writer  # a write after the stream ended fails: the reader has seen how it ended

        try:
            await (asyncio.wait_for(relay(), drop_after) if drop_after is not None else relay())
            record["ended"] = "OK"
        except TimeoutError:
            record["ended"] = "dropped"
        except grpc.aio.AioRpcError as e:
            record["ended"] = e.code().name
        finally:
            call.cancel()
        left = [submit for submit in submits if submit["status"] == UNANSWERED]
        cut = sum(submit["id"] in record["sent"] for submit in left)
        if cut and record["ended"] != "OK":
            self.history.add("fault", what="session cut", client=name, how=record["ended"], unanswered=cut,
                             at=self.history.now())  # fmt: skip
        return left

    def raw_answer(self, record: dict[str, Any], submit: dict[str, Any] | None, result: pb.SessionResult) -> None:
        record["answered"].append(submit["id"] if submit is not None else f"sequence {result.sequence}")
        if submit is None or submit["status"] != UNANSWERED:
            return  # an answer to nothing sent, or a second answer: the session check reports it
        submit["end"] = self.history.now()
        if result.HasField("response"):
            response = result.response
            submit.update(outcome=OK, status="OK", revision=response.revision, hash=response.state_hash,
                          duplicate=response.duplicate)  # fmt: skip
        else:
            status = STATUSES.get(result.error.code, grpc.StatusCode.UNKNOWN)
            submit.update(outcome=REJECTED if status in DEFINITE else UNKNOWN, status=status.name)

    # -- observations and revisions over a session ---------------------------------------------------------

    async def session_observer(self) -> None:
        """One SDK session for the whole run, resuming by itself after every cut; when it ends (it gave up
        reopening, or fell behind) another is opened from where it stopped."""
        events = self.watched[SESSION_OBSERVER] = []
        received = self.received[SESSION_OBSERVER] = []
        self.history.add("watch", client=SESSION_OBSERVER, **{"from": 0}, events=events)
        self.history.add("stream", client=SESSION_OBSERVER, received=received)
        async with self.client(len(STREAM_SUBSCRIBERS) + 1) as client:
            while True:
                after, since = received[-1][0] if received else 0, events[-1][0] if events else 0
                try:
                    async with client.session(
                        EXECUTION, agent_id=SESSION_OBSERVER, after_sequence=after, from_revision=since
                    ) as session:
                        ended = await asyncio.gather(
                            self.observe(session, received), self.follow(session, events), return_exceptions=True
                        )
                    for error in ended:
                        if isinstance(error, BaseException):
                            raise error
                except SkillstateError as e:
                    await self.resumed(SESSION_OBSERVER, e, cursor=since)

    async def observe(self, session: Session, received: list[tuple[int, str]]) -> None:
        async for observation in session.observations():
            received.append((observation.sequence, observation.payload["id"]))  # type: ignore[index]

    async def follow(self, session: Session, events: list[tuple[int, str]]) -> None:
        async for event in session.revisions():
            events.append((event.revision, event.state_hash))
