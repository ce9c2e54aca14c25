"""Consumer groups: competing consumers of one execution's observations, held by the server serving it.

A group is named per execution. Its first member fixes what it reads (the observations addressed to its
skills or to everyone), where it starts (after that member's after_sequence), how long a member may hold
an observation unacknowledged (the ack deadline) and how many it may hold at once. Each observation the
group reads goes to one live member: the one holding the fewest, ties in turn. It stays that member's
until acknowledged; when the member's stream ends or its ack deadline passes, it goes to a member again
(another one, if any is free), its delivery count raised. A member may give one back (`requeue`): it then
waits for another member to be free, and comes back to the same one only while no other member is left
that is not suspected of stalling. A member whose deadline passed gets nothing new
until it acknowledges something: a stalled agent does not keep taking work. Delivery is at least once per
group: a member that handles an observation and dies before acknowledging it causes a redelivery.

A group lives in this server's memory only: after a restart it starts over from its next first member's
after_sequence, and replicas of one shared database hold groups of their own (docs/guarantees.md).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ..storage.records import ObservationRecord


@dataclass(frozen=True, slots=True, eq=False)
class Delivery:
    """An observation as a group hands it out (one object per handing out); `count` is how often it was
    delivered, this time included (0 while it waits for its first)."""

    record: ObservationRecord
    count: int = 0
    given_back_by: str | None = None
    """The member that gave it back (`requeue`): it waits for another, while the group has another."""


class Member:
    """One stream of a group: what it was given and holds unacknowledged."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.inbox: asyncio.Queue[Delivery | BaseException] = asyncio.Queue()
        """Deliveries not yet read by the stream (a delivery taken back since stays here, stale: see
        `current`), or the error that ended the group."""
        self.held: dict[int, tuple[Delivery, asyncio.TimerHandle]] = {}
        """sequence -> the delivery and the timer of its ack deadline."""
        self.expired: set[int] = set()
        """Sequences taken back from this member when their deadline passed; while any is left, it is
        suspected of stalling and is given nothing new (until it acknowledges anything)."""

    def current(self, delivery: Delivery) -> bool:
        """Whether `delivery` is still this member's: not taken back (and perhaps handed out again) since."""
        held = self.held.get(delivery.record.sequence)
        return held is not None and held[0] is delivery


class ConsumerGroup:
    """Hands each observation it is offered to one member at a time, until it is acknowledged."""

    def __init__(
        self,
        execution_id: str,
        name: str,
        addresses: frozenset[str],
        ack_deadline: float,
        max_unacked: int,
        on_idle: Callable[[ConsumerGroup], None],
    ) -> None:
        self.key = (execution_id, name)
        self.name = name
        self.addresses = addresses
        """`skill:NAME` for each of the first member's skills, and `*`."""
        self.ack_deadline = ack_deadline
        self.max_unacked = max_unacked
        self._on_idle = on_idle
        self._ready: collections.deque[Delivery] = collections.deque()
        """Waiting for a member; taken-back deliveries go to the front."""
        self._taken_back: dict[int, Delivery] = {}
        """The deliveries in `_ready` that a member held before, by sequence."""
        self._holder: dict[int, Member] = {}
        self._members: list[Member] = []
        """In turn order: a member that was just given an observation goes to the back."""
        self.feeder: asyncio.Task[None] | None = None
        """Reads the observations addressed to the group into it (observations.py starts it)."""
        self.position = 0
        """The last sequence offered to the group."""

    @property
    def members(self) -> int:
        return len(self._members)

    @property
    def waiting(self) -> int:
        """Observations offered and not yet handed to a member."""
        return len(self._ready)

    def offer(self, record: ObservationRecord) -> None:
        """A new observation for the group, after every one offered before."""
        self.position = record.sequence
        self._ready.append(Delivery(record))
        self._dispatch()

    def join(self, agent_id: str) -> Member:
        member = Member(agent_id)
        self._members.append(member)
        self._dispatch()
        return member

    def leave(self, member: Member) -> None:
        """The member's stream ended: whatever it holds goes to the others, oldest first."""
        self._members.remove(member)
        self._take_back(member, sorted(member.held))
        if not self._members:
            self._on_idle(self)
        self._dispatch()

    def ack(self, sequences: Iterable[int], agent_id: str, requeue: bool = False) -> int:
        """`agent_id` handled these observations (or, with `requeue`, did not: they go to another member at
        once, if one is free); returns how many it held unacknowledged. A member that acknowledges is alive:
        it is no longer suspected of stalling. Only a delivery's holder releases it (another member's ack of
        what was taken back from it and handed on leaves the new holder's hold alone)."""
        for member in self._members:
            if member.agent_id == agent_id:
                member.expired.clear()
        done = 0
        for sequence in sorted(set(sequences)):
            holder = self._holder.get(sequence)
            if holder is not None and holder.agent_id == agent_id:
                done += 1
                if requeue:
                    self._take_back(holder, [sequence], given_back=True)
                else:
                    self._release(holder, sequence)
            elif holder is None and not requeue:
                done += self._forget_waiting(sequence)
        self._dispatch()
        return done

    def fail(self, error: BaseException) -> None:
        """The group can read no more observations: every member's stream ends with `error`."""
        for member in self._members:
            for _, deadline in member.held.values():
                deadline.cancel()
            member.inbox.put_nowait(error)

    def _forget_waiting(self, sequence: int) -> int:
        """Drop a taken-back delivery that was handled after all; 1 if there was one."""
        waiting = self._taken_back.pop(sequence, None)
        if waiting is None:
            return 0
        self._ready.remove(waiting)  # rare: a late acknowledgement of what waits to go out again
        return 1

    def close(self) -> None:
        for member in self._members:
            for _, deadline in member.held.values():
                deadline.cancel()
        if self.feeder is not None:
            self.feeder.cancel()

    def _dispatch(self, avoid: Member | None = None) -> None:
        """Hand out what waits, oldest first, while members are free; what only its giver could take now waits
        for another member (the rest goes on past it)."""
        passed: list[Delivery] = []
        while self._ready and (free := self._free()):
            waiting = self._ready.popleft()
            member = self._next_member(free, avoid, waiting.given_back_by)
            if member is None:
                passed.append(waiting)
                continue
            self._taken_back.pop(waiting.record.sequence, None)
            delivery = Delivery(waiting.record, waiting.count + 1)
            sequence = delivery.record.sequence
            deadline = asyncio.get_running_loop().call_later(self.ack_deadline, self._expire, member, sequence)
            member.held[sequence] = (delivery, deadline)
            self._holder[sequence] = member
            self._members.remove(member)
            self._members.append(member)
            member.inbox.put_nowait(delivery)
        self._ready.extendleft(reversed(passed))

    def _free(self) -> list[Member]:
        return [m for m in self._members if len(m.held) < self.max_unacked and not m.expired]

    def _next_member(self, free: list[Member], avoid: Member | None, given_back_by: str | None) -> Member | None:
        """The free member holding the fewest (ties: the first in turn), `avoid` only if no other is free; never
        the member that gave the delivery back while the group has another not suspected of stalling (None:
        it waits for that one)."""
        if given_back_by is not None and any(m.agent_id != given_back_by and not m.expired for m in self._members):
            free = [m for m in free if m.agent_id != given_back_by]
        others = [m for m in free if m is not avoid] or free
        return min(others, key=lambda m: len(m.held), default=None)

    def _expire(self, member: Member, sequence: int) -> None:
        """The ack deadline of a delivery passed: another member gets it, and this one nothing new."""
        if sequence not in member.held:
            return
        member.expired.add(sequence)
        self._take_back(member, [sequence])
        self._dispatch(avoid=member)

    def _take_back(self, member: Member, sequences: Collection[int], given_back: bool = False) -> None:
        for sequence in reversed(sorted(sequences)):  # to the front in order: the oldest goes out first
            delivery = self._release(member, sequence)
            if given_back:
                delivery = Delivery(delivery.record, delivery.count, member.agent_id)
            self._taken_back[sequence] = delivery
            self._ready.appendleft(delivery)

    def _release(self, member: Member, sequence: int) -> Delivery:
        """The member no longer holds `sequence`; returns what it held."""
        delivery, deadline = member.held.pop(sequence)
        deadline.cancel()
        del self._holder[sequence]
        return delivery
