"""A session: one agent's long-lived stream to the state server (`StateClient.session`).

Submits pipeline on it (many may be outstanding; each returns once its revision is durable), and the agent's
observations, and revisions if asked, arrive on the same stream. A stream cut by UNAVAILABLE is reopened:
unanswered submits are sent again under their idempotency keys (applied once), observations resume after
the last one received, revisions after the last revision.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import grpc

from skillstate.state.v1 import state_pb2 as pb

from ._errors import ResourceExhaustedError, SkillstateError, UnavailableError, from_rpc_error, from_status
from ._owners import MAX_REDIRECTS
from ._retry import Reopenings, RetryPolicy
from ._types import JSON, Observation, PatchResult, RevisionEvent, Snapshot
from ._wire import patch_request

BUFFERED = 10_000
"""Observations, and revisions, received and not yet read: one more ends the session with
ResourceExhaustedError, as the server ends a watcher that falls behind. (Waiting for the reader instead would
stop the results behind them too: a client submitting before it reads would wait forever.)"""

_END = object()
_CLOSE = object()


@dataclass(eq=False, slots=True)
class _Submit:
    message: pb.SessionRequest
    """The submit as sent, its sequence number set each time it is sent."""
    answer: asyncio.Future[PatchResult]
    sent_on: int = -1
    """The connection it was last sent on (see Session._connection)."""


@dataclass(slots=True)
class _Cursor:
    """Where a reopened stream resumes."""

    after_sequence: int
    from_revision: int | None
    head_revision: int = 0


class Session:
    """Use as `async with client.session(execution_id, agent_id=..., skills=[...]) as session:`; leaving the
    block waits for every submit to be answered, then ends the stream (on an error it is cancelled)."""

    def __init__(
        self,
        route: Callable[[pb.SessionOpen], tuple[Any, Any, Callable[[SkillstateError], bool]]],
        retry: RetryPolicy,
        execution_id: str,
        agent_id: str,
        *,
        skills: Sequence[str] = (),
        after_sequence: int = 0,
        group: str = "",
        ack_deadline: float | None = None,
        max_unacked: int = 0,
        from_revision: int | None = None,
        receive_observations: bool = True,
    ) -> None:
        self._route, self._retry = route, retry
        """`route(opening)`: the stub to open the stream on, the metadata to send, and whether a failure of
        that stream named the execution's owner to reopen at once (a client that follows owners)."""
        self._followed: Callable[[SkillstateError], bool] = lambda error: False
        """Whether the last connection's failure named the execution's owner to call at once (`route`)."""
        self.execution_id, self.agent_id = execution_id, agent_id
        self._opening = pb.SessionOpen(
            execution_id=execution_id,
            agent_id=agent_id,
            skills=list(skills),
            group=group,
            ack_deadline_ms=round(ack_deadline * 1000) if ack_deadline is not None else 0,
            max_unacked=max_unacked,
            without_observations=not receive_observations,
        )
        """The open message, completed with where to resume each time the stream is opened."""
        self._cursor = _Cursor(after_sequence, from_revision)
        self._unanswered: dict[int, _Submit] = {}
        self._by_sequence: dict[int, _Submit] = {}
        self._next_sequence = 0
        self._key_prefix, self._keys_made = f"{secrets.token_hex(8)}-", 0
        """Idempotency keys made for submits without one: a random prefix of the session's and a count."""
        self._connection = 0
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()
        self._observations: asyncio.Queue[Any] = asyncio.Queue()
        self._revisions: asyncio.Queue[Any] = asyncio.Queue()
        self._opened: asyncio.Future[None] | None = None
        self._closing = False
        self._failure: BaseException | None = None
        self._last: Any = _END
        """What the observation and revision iterators end with: _END, or the error that ended the session."""
        self._received = False
        """Whether the current connection delivered a message other than progress."""
        self._opened_at = float("inf")
        """When the current connection was opened (its first progress). A cut of a connection that delivered
        something, or lived longer than the longest backoff, starts a new run of failures; one that fails
        right after opening (an error that recurs) counts against the retry policy."""
        self._write_broke = False
        """Whether a write on the current connection failed INTERNAL. A write into a connection that just
        broke ends the call INTERNAL ("Internal error from Core") on this side, whatever the server did: the
        stream was cut, as UNAVAILABLE says elsewhere, and the session reopens it. A status the server sent
        is never taken for a cut."""
        self._runner: asyncio.Task[None] | None = None

    @property
    def head_revision(self) -> int:
        """The newest head revision the server reported (on opening, in progress messages and in results)."""
        return self._cursor.head_revision

    async def __aenter__(self) -> Self:
        self._opened = asyncio.get_running_loop().create_future()
        self._runner = asyncio.create_task(self._run())
        try:
            await self._opened
        except BaseException:  # refused, or the caller gave up waiting: nothing is left running
            await self.close(cancel=True)
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        await self.close(cancel=kind is not None)

    async def submit(
        self,
        patch: Mapping[str, JSON],
        *,
        base_revision: int,
        action: JSON = None,
        client_patch_id: str | None = None,
    ) -> PatchResult:
        """Submit a merge patch computed against base_revision; returns once its revision is durable, or
        raises its error (ConflictError, ValidationError...) exactly as `StateClient.submit_patch` does."""
        self._check_usable()
        if client_patch_id is None:
            self._keys_made += 1
            client_patch_id = f"{self._key_prefix}{self._keys_made:x}"
        message = pb.SessionRequest()
        patch_request(patch, base_revision, action, client_patch_id, into=message.submit.patch)
        pending = _Submit(message, asyncio.get_running_loop().create_future())
        self._unanswered[id(pending)] = pending
        self._outbox.put_nowait(pending)
        return await asyncio.shield(pending.answer)  # a caller that gives up does not withdraw the submit

    async def ack(self, sequences: Sequence[int], *, requeue: bool = False) -> None:
        """Tell the session's consumer group that these observations were handled (with requeue: that they
        were not, to be delivered again at once)."""
        self._check_usable()
        if not self._opening.group:
            raise ValueError("this session joined no consumer group: there is nothing to acknowledge")
        self._outbox.put_nowait(pb.SessionRequest(ack=pb.SessionAck(sequences=list(sequences), requeue=requeue)))

    async def observations(self) -> AsyncIterator[Observation]:
        """The session's observations, in order, until the session ends."""
        if self._opening.without_observations:
            raise ValueError("this session was opened with receive_observations=False: it receives none")
        async for item in self._drain(self._observations):
            yield item

    async def revisions(self) -> AsyncIterator[RevisionEvent | Snapshot]:
        """Every revision after the session's from_revision, in order, until the session ends."""
        if self._cursor.from_revision is None:
            raise ValueError("this session was opened without from_revision: it receives no revisions")
        async for item in self._drain(self._revisions):
            yield item

    async def _drain(self, queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
        while True:
            item = await queue.get()
            if item is _END:
                queue.put_nowait(item)  # the end stays: another or a later iteration ends there too
                return
            if isinstance(item, BaseException):
                queue.put_nowait(item)
                raise item
            yield item

    async def close(self, *, cancel: bool = False) -> None:
        """End the session: after every submit is answered, or at once with `cancel`."""
        if self._runner is None:
            return
        if not self._runner.done():
            if cancel:
                self._runner.cancel()
            else:
                self._closing = True
                self._outbox.put_nowait(_CLOSE)
        await asyncio.gather(self._runner, return_exceptions=True)

    # -- the stream ----------------------------------------------------------------------------------------

    async def _run(self) -> None:
        """Connect, and reconnect after a cut within the retry policy's attempts and deadline (counted from
        the first of a run of failed connections)."""
        loop, reopenings, redirects = asyncio.get_running_loop(), Reopenings(self._retry), 0
        try:
            while True:
                try:
                    await self._stream()
                    self._end(None)
                    return
                except ResourceExhaustedError as unread:
                    self._end(unread)
                    return
                except grpc.aio.AioRpcError as cut:
                    error = from_rpc_error(cut)
                    if self._received or loop.time() - self._opened_at >= self._retry.max_backoff:
                        reopenings.reset()  # that connection worked: a new run of failures
                        redirects = 0
                    if self._followed(error) and redirects < MAX_REDIRECTS:
                        redirects += 1
                        continue  # the execution's owner is named: reopen there at once
                    self._received, self._opened_at = False, float("inf")
                    pause = reopenings.failed(resumable=isinstance(error, UnavailableError) or self._write_broke)
                    if pause is None:
                        self._end(error)
                        return
                await asyncio.sleep(pause)
        except asyncio.CancelledError:
            self._end(SkillstateError("the session was cancelled", grpc.StatusCode.CANCELLED))
            raise
        except BaseException as broken:  # a bug of ours or a broken message: every waiter learns of it
            self._end(SkillstateError(f"the session failed: {broken!r}", grpc.StatusCode.INTERNAL))
            raise

    async def _stream(self) -> None:
        """One connection: open, send what is unanswered, then relay until the stream ends."""
        self._connection += 1
        self._by_sequence.clear()
        self._write_broke = False
        stub, metadata, self._followed = self._route(self._opening)
        call = stub.Session(metadata=metadata)
        writer = asyncio.create_task(self._write(call, self._connection))
        try:
            while (message := await call.read()) is not grpc.aio.EOF:
                self._dispatch(message)
            if writer.done() and writer.exception() is not None:
                raise writer.exception()  # type: ignore[misc]
        except grpc.aio.AioRpcError as ended:
            if ended.code() is grpc.StatusCode.INTERNAL and not writer.done():
                await asyncio.wait({writer}, timeout=1.0)  # did a write of ours break with the connection?
            raise
        finally:
            writer.cancel()
            call.cancel()

    async def _write(self, call: Any, connection: int) -> None:
        cursor, opening = self._cursor, pb.SessionOpen()
        opening.CopyFrom(self._opening)
        opening.after_sequence = cursor.after_sequence
        if cursor.from_revision is not None:
            opening.from_revision = cursor.from_revision
        await self._write_one(call, pb.SessionRequest(open=opening))
        for pending in list(self._unanswered.values()):
            await self._send(call, pending, connection)
        while True:
            if self._closing and all(p.sent_on == connection for p in self._unanswered.values()):
                await call.done_writing()
                return
            item = await self._outbox.get()
            if isinstance(item, _Submit):
                if item.sent_on != connection and not item.answer.done():
                    await self._send(call, item, connection)
            elif item is not _CLOSE:
                await self._write_one(call, item)

    async def _send(self, call: Any, pending: _Submit, connection: int) -> None:
        self._next_sequence += 1
        pending.sent_on = connection
        self._by_sequence[self._next_sequence] = pending
        pending.message.submit.sequence = self._next_sequence
        await self._write_one(call, pending.message)  # one writer at a time: nothing changes it while it is sent

    async def _write_one(self, call: Any, request: pb.SessionRequest) -> None:
        try:
            await call.write(request)
        except grpc.aio.AioRpcError as failed:
            self._write_broke = failed.code() is grpc.StatusCode.INTERNAL
            raise

    def _dispatch(self, message: pb.SessionResponse) -> None:
        kind, cursor = message.WhichOneof("kind"), self._cursor
        if kind != "progress":
            self._received = True  # the connection works: a cut after this starts the backoff over
        elif self._opened_at == float("inf"):
            self._opened_at = asyncio.get_running_loop().time()
        if kind == "result":
            self._answer(message.result)
        elif kind == "observation":
            observation = message.observation
            if not observation.delivery:
                cursor.after_sequence = observation.sequence  # a group's deliveries do not move it
            _buffer(self._observations, Observation.from_pb(observation), "observations")
        elif kind == "revision":
            cursor.from_revision = message.revision.revision
            _buffer(self._revisions, RevisionEvent.from_pb(message.revision), "revisions")
        elif kind == "snapshot":
            s = message.snapshot
            cursor.from_revision = s.revision
            _buffer(
                self._revisions, Snapshot(s.revision, json.loads(s.state_json), s.state_hash, s.revision), "revisions"
            )
        elif kind == "progress":
            cursor.head_revision = max(cursor.head_revision, message.progress.head_revision)
            if self._opened is not None and not self._opened.done():
                self._opened.set_result(None)

    def _answer(self, result: pb.SessionResult) -> None:
        pending = self._by_sequence.pop(result.sequence, None)
        if pending is None:
            return  # answered on an earlier connection
        self._unanswered.pop(id(pending), None)
        if pending.answer.done():
            return
        if result.HasField("error"):
            pending.answer.set_exception(from_status(result.error))
            pending.answer.exception()  # retrieved: a caller that gave up waiting is not reported as losing it
        else:
            answer = PatchResult.from_pb(result.response)
            self._cursor.head_revision = max(self._cursor.head_revision, answer.revision)
            pending.answer.set_result(answer)

    def _end(self, error: BaseException | None) -> None:
        """The session is over: wake every waiter with the error, or end the streams."""
        self._failure = error or SkillstateError("the session is closed", grpc.StatusCode.CANCELLED)
        if self._opened is not None and not self._opened.done():
            self._opened.set_exception(self._failure)
        for pending in self._unanswered.values():
            if not pending.answer.done():
                pending.answer.set_exception(self._failure if pending.sent_on < 0 else _unknown(pending, self._failure))
                pending.answer.exception()  # retrieved: a submit nobody awaits is not reported as lost
        self._unanswered.clear()
        self._last = error if error is not None else _END
        for queue in (self._observations, self._revisions):
            queue.put_nowait(self._last)

    def _check_usable(self) -> None:
        if self._runner is None:
            raise RuntimeError("the session is not open: use `async with client.session(...)`")
        if self._failure is not None:
            raise self._failure
        if self._closing:
            raise RuntimeError("the session is closing: it takes no more submits")


def _unknown(pending: _Submit, cause: BaseException) -> UnavailableError:
    """The answer to a submit that was sent and not answered: it may have been applied, whatever ended the
    stream. Submitting it again under its key tells (the key is in the error's metadata)."""
    key = pending.message.submit.patch.client_patch_id
    return UnavailableError(
        f"the session ended before this submit was answered ({cause}); it may have been applied: submit it "
        f"again with client_patch_id {key!r} to learn its result",
        metadata={"client_patch_id": key},
    )


def _buffer(queue: asyncio.Queue[Any], item: Any, what: str) -> None:
    if queue.qsize() >= BUFFERED:
        raise ResourceExhaustedError(
            f"{what}: {BUFFERED:,} received and not read; read them as they come (Session.{what}())"
        )
    queue.put_nowait(item)
