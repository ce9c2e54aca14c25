"""Fair admission through a real server: one identity's flood does not hold back another's calls or
stream messages.

The flooder's writes hold their seats for as long as the test needs: a second connection to the server's
SQLite file holds its write lock, so each admitted write waits, seated, in its commit, and the flooder's
other calls wait behind them. Nothing moves until the test cancels a seated write (its client goes away,
freeing exactly one seat) or lets the lock go, so who got a freed seat is seen without timing anything: a
quiet call answered while the lock is held got the seat, since a flooder's write given it would still be
waiting in its commit, holding it. The waiting calls themselves are read from the running server's queue
(its guard's FairQueue), the only place they can be seen. SQLite's busy timeout (5 s) bounds how long the
lock may be held; the tests hold it for milliseconds.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from skillstate.clients import PatchResult, RevisionEvent, StateClient
from skillstate.server.auth.credentials import issue
from skillstate.server.auth.fairness import FairQueue
from skillstate.server.auth.guard import Mode
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.memory import MemoryCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from ..waiting import eventually

COUNTER = {"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}}
SEATS = 2
"""Two seats, not one: when the only seat frees nobody holds one, so the tie goes to the identity first in
turn, the flooder (queued before the quiet identity), and one more flooder call would go first (round robin,
tests/server/auth/test_fairness.py). With two, the flooder still holds a seat when one frees, and the quiet
identity, holding none, takes it: its call goes at the very first free seat, which is what these check."""
T = TypeVar("T")
QUEUED = 38
"""The flooder's calls waiting behind its seated ones."""


@dataclass
class Flood:
    """A server with SEATS seats, a flooder and a quiet identity (each with its own client), and `x`, the
    flooder's counter execution."""

    server: RunningServer
    db: Path
    flooder: StateClient
    quiet: StateClient
    flooder_key: str
    quiet_key: str

    @property
    def queue(self) -> FairQueue:
        return self.server.guard._fair

    def write(self) -> asyncio.Task[PatchResult]:
        return asyncio.create_task(self.flooder.submit_patch("x", {"n": 1}, agent_id="flooder", base_revision=0))

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the database's write lock: every commit waits (WAL readers do not)."""
        holder = sqlite3.connect(self.db, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            yield
            holder.execute("ROLLBACK")
        finally:
            holder.close()

    async def seat_the_flood(self) -> tuple[list[asyncio.Task[PatchResult]], list[asyncio.Task[PatchResult]]]:
        """With the write lock held: SEATS flooder writes seated (waiting in their commits), QUEUED waiting."""
        seated = [self.write() for _ in range(SEATS)]
        await eventually(lambda: self.queue.busy == SEATS)
        queued = [self.write() for _ in range(QUEUED)]
        await eventually(lambda: self.queue.waiting(self.flooder_key) == QUEUED)
        return seated, queued


@asynccontextmanager
async def flood(tmp_path: Path) -> AsyncIterator[Flood]:
    credentials = MemoryCredentialStore()
    db = tmp_path / "f.db"
    server = await start_server(
        SqliteRevisionLog(db), "127.0.0.1:0", credentials=credentials, auth=Mode.REQUIRED, seats=SEATS
    )
    address = f"127.0.0.1:{server.port}"
    rights = {Right.READ, Right.WRITE, Right.ADMIN}
    flooder = await issue(credentials, "flooder", ["*"], rights=rights)
    quiet = await issue(credentials, "quiet", ["*"], rights=rights)
    try:
        async with (
            StateClient(address, token=flooder.token) as flooder_client,
            StateClient(address, token=quiet.token) as quiet_client,
        ):
            await flooder_client.create_execution("x", schema=COUNTER, initial_state={"n": 0})
            await quiet_client.get_state("x")  # both connections are up and their credentials known
            yield Flood(
                server, db, flooder_client, quiet_client, flooder.credential.token_id, quiet.credential.token_id
            )
    finally:
        await server.stop(grace=0)


async def served(call: asyncio.Future[T]) -> T:
    """The call's result once it has one. A call the freed seat passed over waits for as long as the lock is
    held, so a deadline, and one under SQLite's busy timeout (5 s), past which a waiting commit fails and
    frees its seat whatever the order."""
    await asyncio.wait([call], timeout=4)
    assert call.done(), "the freed seat went to one of the flooder's waiting calls"
    return call.result()


async def finish(seated: list[asyncio.Task[PatchResult]], queued: list[asyncio.Task[PatchResult]]) -> None:
    """With the lock let go: every write not cancelled is acknowledged, each at a revision of its own."""
    replies = await asyncio.wait_for(asyncio.gather(*(f for f in seated + queued if not f.cancelled())), 30)
    revisions = [reply.revision for reply in replies]
    assert len(set(revisions)) == len(revisions) and min(revisions) >= 1


async def test_a_quiet_identitys_call_takes_the_first_free_seat_before_the_flooders_queued_calls(
    tmp_path: Path,
) -> None:
    async with flood(tmp_path) as f:
        with f.write_lock():
            seated, queued = await f.seat_the_flood()
            read = asyncio.ensure_future(f.quiet.get_state("x"))
            await eventually(lambda: f.queue.waiting(f.quiet_key) == 1)
            assert not read.done(), "every seat is held: the quiet call waits"
            seated[0].cancel()  # one seat frees
            state = await served(read)
            assert state.revision == 0, "served while every flooder write still waited to commit"
            # the quiet call took the freed seat ahead of all QUEUED waiting flooder calls; the seat it gave
            # back went to exactly one of them, which now waits, seated, in its commit
            assert f.queue.waiting(f.flooder_key) == QUEUED - 1 and f.queue.busy == SEATS
            assert f.queue.waiting(f.quiet_key) == 0
        await finish(seated, queued)


async def test_a_quiet_identitys_stream_messages_take_their_turn_before_the_flooders_queued_calls(
    tmp_path: Path,
) -> None:
    """A Watch of the quiet identity needs a turn for each message it sends: while the flood holds every
    seat, each message waits; each seat that frees goes to the message, not to the flooder's queued calls."""
    async with flood(tmp_path) as f:
        created = await f.quiet.create_execution(schema=COUNTER, initial_state={"n": 0})
        backlog = SEATS  # one message for each seated write the test will cancel
        for _ in range(backlog):
            await f.quiet.submit_patch(created.execution_id, {"n": 1}, agent_id="quiet", base_revision=0)
        received: asyncio.Queue[int] = asyncio.Queue()

        async def watch() -> None:
            async for item in f.quiet.watch(created.execution_id, from_revision=0):
                assert isinstance(item, RevisionEvent)
                await received.put(item.revision)

        with f.write_lock():
            seated, queued = await f.seat_the_flood()
            watcher = asyncio.ensure_future(watch())
            try:
                for revision in range(1, backlog + 1):
                    await eventually(lambda: f.queue.waiting(f.quiet_key) == 1)  # the next message waits
                    assert received.empty(), "every seat is held: the message waits for its turn"
                    seated[revision - 1].cancel()  # one seat frees
                    assert await served(asyncio.ensure_future(received.get())) == revision
                    # the message took the freed seat ahead of every waiting flooder call and gave it straight
                    # back, to exactly one of them
                    assert f.queue.waiting(f.flooder_key) == QUEUED - revision and f.queue.busy == SEATS
            finally:
                watcher.cancel()
        await finish(seated, queued)
