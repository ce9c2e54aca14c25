"""One agent's Session stream: its submits pipelined and answered in order, its observations (and, if asked,
the execution's revisions) on the same stream.

Tasks feed one outbox that the stream drains: the reader (requests: up to `max_stream_in_flight` submits
unanswered, each merged on the spot where it need not wait, else in a task of its own; acks apply), the
results (queued in submission order, each once its revision is durable, as SubmitPatch answers, and on a
session that receives revisions only after the revision it committed), the observation pump and the
revision pump. Every message queued counts against a bound released when it is sent, so a client that stops
reading stops the server reading its submits, and HTTP/2 flow control holds the client back. Only the
stream's end (the client's half-close after its last answer, a protocol error, a failed pump) ends the
session; a refused submit is one result.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import code_pb2, status_pb2

from skillstate.state.v1 import state_pb2 as pb

from ..auth.guard import Guard, Identity
from ..engine.config import EngineConfig
from ..engine.observations import GroupOptions
from ..engine.patches import Committing
from ..engine.requests import check_label
from ..engine.results import SubmitResult, WatchSnapshot
from ..engine.state_engine import StateEngine
from ..errors import (
    FencedError,
    InvalidArgumentError,
    NotOwnerError,
    PermissionDeniedError,
    StateError,
    UnauthenticatedError,
)
from ..metrics import Metrics
from ..storage.records import RevisionRecord
from . import messages
from .handlers import Undecodable
from .status_details import error_status

log = logging.getLogger(__name__)

SUBMIT_METRIC = "Session.submit"
"""The method label of a session's submits in the RPC metrics (the stream itself is `Session`)."""
_STATUS_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}

STREAMED_AHEAD = 256
"""Observations and revisions a session queues for its client before it waits for the client to read."""

_END = object()
"""Queued after the last result of a stream the client half-closed: the session ends there."""

_INTERNAL = status_pb2.Status(code=code_pb2.INTERNAL, message="internal error in Session (logged by the server)")

Queued = tuple[Any, asyncio.Semaphore | None]
"""A message for the client with the bound its sending frees; or an exception to end with, or _END."""


class Session:
    """The server's side of one Session stream, opened by a checked SessionOpen."""

    def __init__(
        self,
        engine: StateEngine,
        guard: Guard,
        config: EngineConfig,
        metrics: Metrics,
        identity: Identity,
        peer: str,
        opening: pb.SessionOpen,
    ) -> None:
        self._engine, self._guard, self._config, self._metrics = engine, guard, config, metrics
        self._identity, self._peer = identity, peer
        self._opening = opening
        self._execution_id, self._agent_id = opening.execution_id, opening.agent_id
        self._outbox: asyncio.Queue[Queued] = asyncio.Queue()
        self._in_flight = asyncio.Semaphore(config.max_stream_in_flight)
        self._streamed = asyncio.Semaphore(STREAMED_AHEAD)
        self._unanswered: collections.deque[_Answer] = collections.deque()
        """Submits in the order they came, until their results are queued for the client."""
        self._read_all = False
        self._ending = False
        """Whether the end is queued (once: every revision queued after the last answer flushes again)."""
        self._last_sequence: int | None = None
        self._sent_at = 0.0
        self._revisions_queued: int | None = opening.from_revision if opening.HasField("from_revision") else None
        """For a session that receives revisions, the last one queued for the client (none after
        from_revision yet: the client has those): a result waits until the revision it committed is queued."""

    @classmethod
    async def open(
        cls,
        engine: StateEngine,
        guard: Guard,
        config: EngineConfig,
        metrics: Metrics,
        identity: Identity,
        peer: str,
        first: Any,
    ) -> Session:
        """Check the first message: a SessionOpen naming an existing execution, an agent the credential may
        be, and skills it runs. Raises the error that ends the stream otherwise."""
        if isinstance(first, Undecodable):
            raise first.error()
        kind = first.WhichOneof("kind") if first is not None else None
        if kind != "open":
            raise InvalidArgumentError(f"open: the first message of a session must be open, got {kind or 'nothing'}")
        opening = first.open
        guard.authorize("StreamObservations", opening, identity)
        check_label(opening.agent_id, "open.agent_id", config.limits)
        if opening.group and opening.without_observations:
            raise InvalidArgumentError("open.without_observations: a consumer group's member receives its observations")
        if opening.HasField("from_revision") and opening.from_revision < 0:
            raise InvalidArgumentError(f"open.from_revision: must be >= 0, got {opening.from_revision}")
        await engine.head_revision(opening.execution_id)  # NOT_FOUND before anything starts
        return cls(engine, guard, config, metrics, identity, peer, opening)

    async def responses(self, requests: AsyncIterator[Any]) -> AsyncGenerator[pb.SessionResponse, None]:
        """The stream's messages: a progress first (the session is open), then results, observations and
        revisions as they come, and a progress after `progress_interval` seconds of silence."""
        loop = asyncio.get_running_loop()
        self._sent_at = loop.time()
        tasks = [asyncio.create_task(self._read(requests)), asyncio.create_task(self._keep_alive())]
        if not self._opening.without_observations:
            tasks.append(asyncio.create_task(self._observe()))
        if self._opening.HasField("from_revision"):
            tasks.append(asyncio.create_task(self._watch()))
        for task in tasks:
            task.add_done_callback(self._failed)
        try:
            yield await self._progress()
            self._sent_at = loop.time()
            while True:
                message, bound = await self._outbox.get()
                if message is _END:
                    return
                if isinstance(message, BaseException):
                    raise message
                yield message
                self._sent_at = loop.time()
                if bound is not None:
                    bound.release()
        finally:
            for task in tasks:
                task.remove_done_callback(self._failed)
                task.cancel()
            self._cancel_unanswered()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _failed(self, task: asyncio.Task[None]) -> None:
        """A task that ends with an error ends the session with it."""
        if not task.cancelled() and task.exception() is not None:
            self._outbox.put_nowait((task.exception(), None))

    async def _read(self, requests: AsyncIterator[Any]) -> None:
        async for request in requests:
            if isinstance(request, Undecodable):
                raise request.error()
            kind = request.WhichOneof("kind")
            await self._guard.revalidate(self._identity)  # a revoked credential ends the session
            if kind == "submit":
                await self._in_flight.acquire()  # while every slot is taken, the stream is not read
                self._start(request.submit)
            elif kind == "ack":
                await self._engine.ack_observations(
                    self._execution_id,
                    self._opening.group,
                    self._agent_id,
                    list(request.ack.sequences),
                    request.ack.requeue,
                )
            elif kind == "open":
                raise InvalidArgumentError("open: this session is already open (send open once, first)")
            else:
                raise InvalidArgumentError("kind: a SessionRequest sets one of open, submit or ack")
        self._read_all = True  # the client is done writing: answer what it sent, then end
        self._flush()

    def _start(self, submit: pb.SessionSubmit) -> None:
        """Run the submit, or answer it with the status it is refused with. While a seat is free (no call of
        any identity waits for one), a submit that needs no wait is merged on the spot and answered once
        its commit is durable, without a task of its own; else it takes its seat in a task, as a unary
        SubmitPatch does."""
        sequence, patch = submit.sequence, submit.patch
        answer = _Answer(sequence, time.perf_counter())
        self._unanswered.append(answer)
        try:
            if self._last_sequence is not None and sequence <= self._last_sequence:
                raise InvalidArgumentError(
                    f"submit.sequence: {sequence} is not greater than the previous submit's {self._last_sequence}"
                )
            self._last_sequence = sequence
            for field, value in (("execution_id", self._execution_id), ("agent_id", self._agent_id)):
                given = getattr(patch, field)
                if given and given != value:
                    raise InvalidArgumentError(f"submit.patch.{field}: {given!r} is not the session's {value!r}")
                setattr(patch, field, value)
            self._guard.authorize("SubmitPatch", patch, self._identity)
            committing = self._submit_now(patch) if self._guard.seat_free() else None
        except Exception as refused:
            answer.response = _refused(sequence, self._refusal(refused))
            self._flush()
            return
        if committing is None:
            answer.task = asyncio.ensure_future(self._submit(answer, patch))
        else:
            committing.when_durable(functools.partial(self._durable, answer, committing.result))

    def _submit_now(self, patch: pb.SubmitPatchRequest) -> Committing | None:
        return self._engine.submit_patch_now(
            patch.execution_id,
            patch.agent_id,
            patch.base_revision,
            patch.patch_json,
            patch.client_patch_id,
            patch.action_json,
            self._identity.skills,
        )

    def _durable(self, answer: _Answer, result: SubmitResult, error: Exception | None) -> None:
        if isinstance(error, NotOwnerError | FencedError):
            self._moved(error)
            return
        if error is None:
            answer.response, answer.revision = _answered(answer.sequence, result), result.revision
        else:
            answer.response = _refused(answer.sequence, self._refusal(error))
        self._flush()

    async def _submit(self, answer: _Answer, patch: pb.SubmitPatchRequest) -> None:
        try:
            async with self._guard.admitted(self._identity, self._peer):
                result = await self._engine.submit_patch(
                    patch.execution_id,
                    patch.agent_id,
                    patch.base_revision,
                    patch.patch_json,
                    patch.client_patch_id,
                    patch.action_json,
                    self._identity.skills,
                )
            answer.response, answer.revision = _answered(answer.sequence, result), result.revision
        except (NotOwnerError, FencedError) as moved:
            self._moved(moved)
            return
        except Exception as refused:
            answer.response = _refused(answer.sequence, self._refusal(refused))
        self._flush()

    def _moved(self, error: StateError) -> None:
        """The execution moved to another replica (replicas with leases): end the stream UNAVAILABLE, so that
        the client reopens it, there or through here, and sends its unanswered submits again under their
        idempotency keys (nothing of this one was committed)."""
        self._outbox.put_nowait((error, None))

    def _refusal(self, error: BaseException) -> status_pb2.Status:
        """The status a submit failing with `error` is answered with; refusals of access are logged, and
        anything unexpected is INTERNAL (logged), as for a unary call."""
        if isinstance(error, UnauthenticatedError | PermissionDeniedError):
            self._guard.refused("SubmitPatch", self._peer, error)
        if isinstance(error, StateError):
            return error_status(error)
        log.error("a session's submit failed", exc_info=error)
        return _INTERNAL

    def _flush(self) -> None:
        """Queue the results that are next in submission order, each after the revision it committed if the
        session receives revisions; after the last, the end."""
        unanswered, queued = self._unanswered, self._revisions_queued
        while unanswered and (response := unanswered[0].response) is not None:
            if queued is not None and unanswered[0].revision > queued:
                break  # queued by _watch, which flushes again
            answer = unanswered.popleft()
            result = response.result
            status = _STATUS_NAMES.get(result.error.code, "UNKNOWN") if result.HasField("error") else "OK"
            self._metrics.rpc(SUBMIT_METRIC, time.perf_counter() - answer.started, status)
            self._outbox.put_nowait((response, self._in_flight))
        if self._read_all and not unanswered and not self._ending:
            self._ending = True
            self._outbox.put_nowait((_END, None))

    async def _observe(self) -> None:
        opening, engine = self._opening, self._engine
        skills = list(opening.skills)
        if opening.group:
            options = GroupOptions(opening.group, opening.ack_deadline_ms, opening.max_unacked)
            stream: Any = engine.group_observations(
                self._execution_id, self._agent_id, skills, opening.after_sequence, options
            )
        else:
            stream = engine.observations(self._execution_id, self._agent_id, skills, opening.after_sequence)
        async with contextlib.aclosing(stream) as observations:  # leaving a group is not left to the GC
            async for item in observations:
                record, delivery = item if opening.group else (item, 0)
                await self._queue(pb.SessionResponse(observation=messages.observation(record, delivery)))

    async def _watch(self) -> None:
        try:
            watch = self._engine.watch(self._execution_id, self._opening.from_revision)
            async with contextlib.aclosing(watch) as items:
                async for item in items:
                    if isinstance(item, RevisionRecord):
                        await self._queue(pb.SessionResponse(revision=messages.revision_event(item)))
                    elif isinstance(item, WatchSnapshot):
                        await self._queue(pb.SessionResponse(snapshot=messages.snapshot(item)))
                    else:
                        continue  # Watch's own progress: the session sends its own
                    self._revisions_queued = item.revision
                    self._flush()  # the results that waited for it
        finally:  # whatever ended the revisions (a watcher too slow...), the results waiting go out before it
            self._revisions_queued = None
            self._flush()

    async def _queue(self, message: pb.SessionResponse) -> None:
        await self._streamed.acquire()
        self._outbox.put_nowait((message, self._streamed))

    async def _keep_alive(self) -> None:
        """A progress message after every `progress_interval` seconds in which nothing was sent."""
        loop, interval = asyncio.get_running_loop(), self._config.progress_interval
        while True:
            silent = loop.time() - self._sent_at
            if silent < interval:
                await asyncio.sleep(interval - silent)
            elif self._outbox.empty():
                await self._guard.revalidate(self._identity)  # a session that only reads ends too
                self._sent_at = loop.time()
                self._outbox.put_nowait((await self._progress(), None))
            else:
                await asyncio.sleep(interval)  # messages wait for the client to read: it knows the stream is alive

    async def _progress(self) -> pb.SessionResponse:
        head = await self._engine.head_revision(self._execution_id)
        return pb.SessionResponse(progress=pb.Progress(head_revision=head))

    def _cancel_unanswered(self) -> None:
        for answer in self._unanswered:
            if answer.task is not None:
                answer.task.cancel()


@dataclass(slots=True)
class _Answer:
    """One submit of the stream: its result once known."""

    sequence: int
    started: float
    response: pb.SessionResponse | None = None
    """Its result, once known, as the message that carries it."""
    revision: int = 0
    """The revision it committed (or committed before, for a duplicate); 0 when refused."""
    task: asyncio.Future[None] | None = None


def _answered(sequence: int, result: SubmitResult) -> pb.SessionResponse:
    """The message answering submit `sequence` with its result (built in place: no nested copies)."""
    message = pb.SessionResponse()
    message.result.sequence = sequence
    messages.submit_response(result, into=message.result.response)
    return message


def _refused(sequence: int, error: status_pb2.Status) -> pb.SessionResponse:
    message = pb.SessionResponse()
    message.result.sequence = sequence
    message.result.error.CopyFrom(error)
    return message
