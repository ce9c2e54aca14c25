"""Observations: durable messages addressed to one agent, to the agents of a skill, or to everyone.

Each execution numbers its observations; a stream replays the stored ones after the sequence it was asked
for, then follows live ones, so an agent that reconnects with its last sequence misses nothing. A stream
may instead join a consumer group (groups.py), whose members share the observations of their skills.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Collection, Sequence
from dataclasses import dataclass

from ..errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    NotOwnerError,
    StateError,
    WatcherTooSlowError,
)
from ..limits import Limits
from ..storage.records import ObservationRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .committer import GroupCommitter, Pending
from .execution import Execution
from .executions import Executions
from .groups import ConsumerGroup, Delivery, Member
from .hub import Hub, Subscription, follow
from .requests import check_address, check_label

log = logging.getLogger(__name__)

MAX_ACK_DEADLINE_MS = 3_600_000
"""The longest ack deadline a group may ask for (an hour)."""
MAX_UNACKED = 1024
"""The most observations a group may let one member hold unacknowledged, and acknowledge at once."""


@dataclass(frozen=True, slots=True)
class GroupOptions:
    """What a stream asks of the consumer group it joins; the group's first member decides for all."""

    name: str
    ack_deadline_ms: int = 0
    """0: the server's default."""
    max_unacked: int = 0
    """0: 1."""


class Observations:
    """Publishes observations through the group committer and streams them to their addressees."""

    def __init__(
        self,
        log: RevisionLog,
        executions: Executions,
        committer: GroupCommitter[Execution],
        limits: Limits,
        queue_size: int,
        max_streams: int,
        ack_deadline: float = 30.0,
        group_idle: float = 300.0,
    ) -> None:
        """`executions`: where a consumer group pins its execution in memory for as long as it exists (its
        feeder follows that execution)."""
        self._log = log
        self._committer = committer
        self._limits = limits
        self._hub: Hub[ObservationRecord] = Hub(queue_size, max_streams, "observation streams")
        self._queue_size, self._max_groups = queue_size, max_streams
        self._ack_deadline, self._group_idle = ack_deadline, group_idle
        self._groups: dict[tuple[str, str], ConsumerGroup] = {}
        self._idle: dict[ConsumerGroup, asyncio.TimerHandle] = {}
        """Groups without members, and the timer that drops each after `group_idle` seconds."""
        self._executions = executions
        self._following: dict[ConsumerGroup, Execution] = {}
        """Each group's execution, pinned in memory while the group exists."""

    async def publish(self, execution: Execution, to: str, source: str, kind: str, payload_json: str) -> int:
        """Store one observation durably; returns its sequence number."""
        limits = self._limits
        to = check_address(to, limits)
        source = check_label(source, "source", limits, required=False)
        kind = check_label(kind, "kind", limits, required=False)
        payload = canonical.parse(payload_json or "null", "payload_json", limits)
        record = ObservationRecord(
            execution.id,
            execution.observation_sequence + 1,
            to,
            source,
            kind,
            canonical.dumps_str(payload),
            time.time(),
        )
        execution.refuse_if_deleted()
        pending = Pending(execution, execution.epoch, observation=record)
        self._committer.enqueue(pending)
        execution.observation_sequence = record.sequence
        await pending.future
        return record.sequence

    def stream_count(self) -> int:
        return self._hub.count()

    def streamed(self) -> set[str]:
        """The executions with open observation streams."""
        return self._hub.keys()

    def committed(self, execution: Execution, record: ObservationRecord) -> None:
        """Called by the engine once the record is durable: hand it to the live streams."""
        execution.observation_committed = record.sequence
        self._hub.publish(execution.id, record)

    async def stream(
        self, execution: Execution, agent_id: str, skills: Sequence[str], after_sequence: int
    ) -> AsyncGenerator[ObservationRecord, None]:
        """Observations addressed to agent_id, to one of its skills or to everyone, after after_sequence."""
        agent_id = check_label(agent_id, "agent_id", self._limits)
        addresses = {agent_id, *self._addresses(skills)}
        async for observation in self._follow(execution, addresses, after_sequence):
            yield observation

    async def group_stream(
        self, execution: Execution, agent_id: str, skills: Sequence[str], after_sequence: int, options: GroupOptions
    ) -> AsyncGenerator[tuple[ObservationRecord, int], None]:
        """As a member of a consumer group: (observation, delivery count) for those the group hands this
        member, and (observation, 0) for those addressed to agent_id, after after_sequence."""
        agent_id = check_label(agent_id, "agent_id", self._limits)
        group = self._join(execution, skills, after_sequence, options)
        member = group.join(agent_id)
        direct: asyncio.Queue[ObservationRecord | BaseException] = asyncio.Queue(self._queue_size)
        pump = asyncio.create_task(self._pump(execution, agent_id, after_sequence, direct))
        reads: dict[asyncio.Future[object], asyncio.Queue] = {}  # type: ignore[type-arg]
        try:
            for queue in (direct, member.inbox):
                reads[asyncio.ensure_future(queue.get())] = queue
            while True:
                done, _ = await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
                for read in sorted(done, key=lambda r: reads[r] is member.inbox):  # its own first
                    queue = reads.pop(read)
                    item = read.result()
                    if isinstance(item, Delivery):
                        if member.current(item):  # else taken back since, and handed on: not this member's
                            yield item.record, item.count
                    elif isinstance(item, ObservationRecord):
                        yield item, 0
                    elif isinstance(item, BaseException):
                        raise item  # the pump failed
                    reads[asyncio.ensure_future(queue.get())] = queue
        finally:
            for read in reads:
                read.cancel()
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
            self._leave(group, member)

    def ack(
        self, execution: Execution, group_name: str, agent_id: str, sequences: Collection[int], requeue: bool = False
    ) -> int:
        """`agent_id` acknowledges observations its group delivered it (with `requeue`: hand them out again
        now); returns how many it held unacknowledged."""
        if len(sequences) > MAX_UNACKED:
            raise InvalidArgumentError(
                f"sequences: {len(sequences):,} in one acknowledgement, more than {MAX_UNACKED} (what a member "
                "may hold): acknowledge in parts"
            )
        group = self._groups.get((execution.id, check_label(group_name, "group", self._limits)))
        if group is None:
            raise NotFoundError(
                f"group: execution {execution.id!r} has no consumer group {group_name!r} on this server "
                "(a group lives while it has members, and for a while after its last one left)"
            )
        return group.ack(sequences, check_label(agent_id, "agent_id", self._limits), requeue)

    def _join(
        self, execution: Execution, skills: Sequence[str], after_sequence: int, options: GroupOptions
    ) -> ConsumerGroup:
        """The group a stream asks for, made by this first member if it does not exist yet."""
        name = check_label(options.name, "group", self._limits)
        addresses = frozenset(self._addresses(skills))
        if not 0 <= options.ack_deadline_ms <= MAX_ACK_DEADLINE_MS:
            raise InvalidArgumentError(
                f"ack_deadline_ms: must be in 0..{MAX_ACK_DEADLINE_MS}, got {options.ack_deadline_ms}"
            )
        if not 0 <= options.max_unacked <= MAX_UNACKED:
            raise InvalidArgumentError(f"max_unacked: must be in 0..{MAX_UNACKED}, got {options.max_unacked}")
        group = self._groups.get((execution.id, name))
        if group is not None:
            if group.addresses != addresses:
                raise InvalidArgumentError(
                    f"skills: consumer group {name!r} reads {_skills_of(group.addresses)}; this stream asked for "
                    f"{_skills_of(addresses)} (every member of a group runs the same skills)"
                )
            idle = self._idle.pop(group, None)
            if idle is not None:
                idle.cancel()
            return group
        if sum(1 for execution_id, _ in self._groups if execution_id == execution.id) >= self._max_groups:
            raise LimitExceededError(f"consumer groups: execution {execution.id!r} has {self._max_groups}, the limit")
        deadline = options.ack_deadline_ms / 1000 if options.ack_deadline_ms else self._ack_deadline
        reading = self._subscribe(execution, addresses)  # here: over the limit, the first member is told why
        group = ConsumerGroup(execution.id, name, addresses, deadline, options.max_unacked or 1, self._schedule_drop)
        group.position = max(after_sequence, 0)
        self._groups[(execution.id, name)] = group
        self._following[group] = execution
        self._executions.pin(execution)
        feeding = self._feed(execution, group, reading)
        group.feeder = asyncio.create_task(feeding, name=f"group {execution.id}/{name}")
        return group

    def _leave(self, group: ConsumerGroup, member: Member) -> None:
        if self._groups.get(group.key) is group:  # not closed with the server
            group.leave(member)

    def _schedule_drop(self, group: ConsumerGroup) -> None:
        """The group's last member left: drop it unless a member joins within `group_idle` seconds."""

        def drop() -> None:
            self._idle.pop(group, None)
            if self._groups.get(group.key) is group and not group.members:
                self._remove(group)
                group.close()

        self._idle[group] = asyncio.get_running_loop().call_later(self._group_idle, drop)

    async def _feed(
        self, execution: Execution, group: ConsumerGroup, reading: Subscription[ObservationRecord] | None
    ) -> None:
        """Offer the group every observation addressed to it, after its position, as long as it exists. If it
        cannot read on, the group ends, and so does every member's stream, with the error."""
        while True:
            try:
                if reading is None:  # it never waits, so only a burst made it fall behind: read on
                    reading = self._subscribe(execution, group.addresses)
                async for observation in self._follow(execution, group.addresses, group.position, reading):
                    group.offer(observation)
            except WatcherTooSlowError:
                reading = None
                continue
            except Exception as error:
                if not isinstance(error, NotFoundError | NotOwnerError):  # else it was deleted, or moved
                    log.exception("consumer group %r of execution %r stopped reading", group.name, execution.id)
                if self._groups.get(group.key) is group:
                    self._remove(group)
                group.fail(error)
                return

    def _remove(self, group: ConsumerGroup) -> None:
        del self._groups[group.key]
        execution = self._following.pop(group)
        self._executions.release(execution)

    async def _pump(
        self,
        execution: Execution,
        agent_id: str,
        after_sequence: int,
        into: asyncio.Queue[ObservationRecord | BaseException],
    ) -> None:
        """A group member's own observations (addressed to its agent id) into its stream's queue."""
        try:
            async for observation in self._follow(execution, {agent_id}, after_sequence):
                await into.put(observation)
        except Exception as e:  # the stream raises it to its reader
            await into.put(e)

    def _addresses(self, skills: Sequence[str]) -> list[str]:
        return ["*", *(f"skill:{check_label(s, 'skills', self._limits)}" for s in skills)]

    def _subscribe(self, execution: Execution, addresses: Collection[str]) -> Subscription[ObservationRecord]:
        subscription = self._hub.subscribe(execution.id, lambda o: o.to in addresses)
        try:
            execution.refuse_if_deleted()
        except NotFoundError:
            self._hub.unsubscribe(subscription)
            raise
        return subscription

    async def _follow(
        self,
        execution: Execution,
        addresses: Collection[str],
        after_sequence: int,
        subscription: Subscription[ObservationRecord] | None = None,
    ) -> AsyncGenerator[ObservationRecord, None]:
        """Stored observations to `addresses` after after_sequence, then live ones as they commit (through
        `subscription` if the caller made one before its first await)."""
        subscription = subscription or self._subscribe(execution, addresses)
        caught_up_to = execution.observation_committed
        cursor = max(after_sequence, 0)
        try:
            while cursor < caught_up_to:
                page = await self._log.read_observations(execution.id, after=cursor, limit=512)
                for observation in page:
                    if observation.sequence > caught_up_to:
                        break
                    if observation.to in addresses:
                        yield observation
                    cursor = observation.sequence
                if not page:
                    break
            position = max(cursor, caught_up_to)
            async for observation in follow(
                subscription, position, lambda o: o.sequence, "observation stream", "after_sequence"
            ):
                yield observation
        finally:
            self._hub.unsubscribe(subscription)

    def end(self, execution_id: str, error: StateError) -> None:
        """End every stream and consumer group of an execution with `error` (it was deleted): each reads
        what was queued for it, then gets the error."""
        self._hub.cut(execution_id, error)

    def close(self) -> None:
        """Stop every group (their members' streams end with the server)."""
        for group in self._groups.values():
            group.close()
        for idle in self._idle.values():
            idle.cancel()
        self._groups.clear()
        self._idle.clear()
        self._following.clear()


def _skills_of(addresses: frozenset[str]) -> list[str]:
    return sorted(address.removeprefix("skill:") for address in addresses if address != "*")
