"""Observations: durable messages addressed to one agent, to the agents of a skill, or to everyone.

Each execution numbers its observations; a stream replays the stored ones after the sequence it was asked
for, then follows live ones, so an agent that reconnects with its last sequence misses nothing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from ..limits import Limits
from ..storage.records import ObservationRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .committer import GroupCommitter, Pending
from .execution import Execution
from .hub import Hub, follow
from .requests import check_address, check_label


class Observations:
    """Publishes observations through the group committer and streams them to their addressees."""

    def __init__(
        self, log: RevisionLog, committer: GroupCommitter[Execution], limits: Limits, queue_size: int, max_streams: int
    ) -> None:
        self._log = log
        self._committer = committer
        self._limits = limits
        self._hub: Hub[ObservationRecord] = Hub(queue_size, max_streams, "observation streams")

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
    ) -> AsyncIterator[ObservationRecord]:
        """Observations addressed to agent_id, to one of its skills or to everyone, after after_sequence."""
        agent_id = check_label(agent_id, "agent_id", self._limits)
        addresses = {agent_id, "*", *(f"skill:{check_label(s, 'skills', self._limits)}" for s in skills)}
        subscription = self._hub.subscribe(execution.id, lambda o: o.to in addresses)
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
