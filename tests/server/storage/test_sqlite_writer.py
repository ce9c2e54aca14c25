"""The revision log's writer: small commits on the event loop, the rest in its thread, one side at a time.

Where a commit ran shows in whether awaiting it gave the loop up: a callback scheduled just before runs
only if the commit waited for the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skillstate.server.errors import DuplicateRowError, StorageFullError
from skillstate.server.storage import sqlite_writer
from skillstate.server.storage.sqlite import BUSY_TIMEOUT_MS, Statement
from skillstate.server.storage.sqlite_writer import INLINE_BYTES, RECENT, SLOW_OF_RECENT, Writer

TABLE = "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"


def row(key: int, value: str = "v") -> Statement:
    return "INSERT INTO t VALUES (?, ?)", (key, value)


async def gave_up_the_loop(write: asyncio.Future[None] | object) -> bool:
    """Whether awaiting `write` let a callback scheduled before it run."""
    ran = []
    asyncio.get_running_loop().call_soon(ran.append, True)
    await write  # type: ignore[misc]
    return bool(ran)


def stored(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT k, v FROM t ORDER BY rowid").fetchall()


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[Writer]:
    opened = Writer(tmp_path / "w.db", "test log", inline_row_cost=1.0)  # a commit of any size may run inline
    await opened.open()
    await opened.script(TABLE)
    yield opened
    await opened.close()


async def test_a_small_commit_runs_on_the_loop_and_is_stored(writer: Writer, tmp_path: Path) -> None:
    assert writer.commits_inline
    assert not await gave_up_the_loop(writer.commit(row(1), row(2), rows=2))
    assert stored(tmp_path / "w.db") == [(1, "v"), (2, "v")]


async def test_a_large_commit_runs_in_the_thread(writer: Writer, tmp_path: Path) -> None:
    large = "x" * (INLINE_BYTES + 1)
    assert await gave_up_the_loop(writer.commit(row(1, large), rows=1))
    assert stored(tmp_path / "w.db") == [(1, large)]


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection holds the file's write lock (as another store on the same file may)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_a_commit_waits_behind_work_queued_in_the_thread(writer: Writer, tmp_path: Path) -> None:
    with write_locked(tmp_path / "w.db"):
        earlier = asyncio.ensure_future(writer.transaction(row(1, "first")))  # waits in the thread for the lock
        await asyncio.sleep(0)
        later = asyncio.ensure_future(writer.commit(row(2, "second"), rows=1))
        await asyncio.sleep(0)
        assert not earlier.done() and not later.done()
    await asyncio.gather(earlier, later)
    assert stored(tmp_path / "w.db") == [(1, "first"), (2, "second")]


async def test_a_commit_never_waits_on_the_loop_for_another_connections_lock(writer: Writer, tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    with write_locked(tmp_path / "w.db"):
        commit = asyncio.ensure_future(writer.commit(row(1), rows=1))
        began = loop.time()
        done, _ = await asyncio.wait({commit}, timeout=0.05)
        assert not done
        assert loop.time() - began < BUSY_TIMEOUT_MS / 1000 / 5  # the loop went on, not held by the busy wait
    await commit  # in the thread, once the lock is free
    assert stored(tmp_path / "w.db") == [(1, "v")]


async def test_a_cancelled_transaction_is_written_whole(writer: Writer, tmp_path: Path) -> None:
    cancelled = asyncio.ensure_future(writer.transaction(row(1), row(2)))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await writer.transaction(row(3))  # behind it in the thread
    assert not await gave_up_the_loop(writer.commit(row(4), rows=1))  # the thread is known to be idle again
    assert [k for k, _ in stored(tmp_path / "w.db")] == [1, 2, 3, 4]


async def test_slow_commits_on_the_loop_move_commits_to_the_thread(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "w.db", "test log", inline_budget=1e-9, inline_row_cost=1.0)
    await writer.open()
    await writer.script(TABLE)
    try:
        for key in range(1, SLOW_OF_RECENT + 1):  # each on the loop, and each over its budget
            assert writer.commits_inline
            assert not await gave_up_the_loop(writer.commit(row(key), rows=1))
        assert not writer.commits_inline
        assert await gave_up_the_loop(writer.commit(row(SLOW_OF_RECENT + 1), rows=1))
    finally:
        await writer.close()
    assert [k for k, _ in stored(tmp_path / "w.db")] == list(range(1, SLOW_OF_RECENT + 2))


@pytest.mark.parametrize(
    ("pattern", "moved"),
    [
        ([True] + [False] * (RECENT - 1), False),  # one slow commit: the thread descheduled, say
        ([True] + [False] * (RECENT - 1) + [True] * (SLOW_OF_RECENT - 1), False),  # the first slid out
        ([True, False] * (SLOW_OF_RECENT - 1) + [True], True),  # a disk that stalls on every other commit
    ],
    ids=["one alone", "spread wider than the window", "on and off"],
)
async def test_commits_move_to_the_thread_once_enough_of_the_recent_ones_were_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: list[bool], moved: bool
) -> None:
    writer = Writer(tmp_path / "w.db", "test log", inline_budget=1.0, inline_row_cost=1.0)
    await writer.open()
    await writer.script(TABLE)
    try:
        for key, slow in enumerate(pattern):
            monkeypatch.setattr(writer, "_inline_budget", 1e-9 if slow else 1.0)  # this commit over it, or not
            assert not await gave_up_the_loop(writer.commit(row(key), rows=1))
        assert writer.commits_inline is not moved
    finally:
        await writer.close()


async def test_commits_return_to_the_loop_after_the_cool_down(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "w.db", "test log", inline_budget=1e-9, cool_down=0.0, inline_row_cost=1.0)
    await writer.open()
    await writer.script(TABLE)
    try:
        for key in range(SLOW_OF_RECENT):
            await writer.commit(row(key), rows=1)
        assert writer.commits_inline
        assert not await gave_up_the_loop(writer.commit(row(SLOW_OF_RECENT), rows=1))
    finally:
        await writer.close()


async def test_a_commit_of_few_rows_runs_on_the_loop_now_and_then_to_measure_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "PROBE_INTERVAL", 0.0)
    writer = Writer(tmp_path / "w.db", "test log", inline_row_cost=1e-12)
    await writer.open()
    await writer.script(TABLE)
    try:
        await writer.commit(row(1), rows=1)
        assert not await gave_up_the_loop(writer.commit(row(2), rows=1))  # too few rows, but a probe
    finally:
        await writer.close()


async def test_a_zero_budget_keeps_every_commit_in_the_thread(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "w.db", "test log", inline_budget=0)
    await writer.open()
    await writer.script(TABLE)
    try:
        assert not writer.commits_inline
        assert await gave_up_the_loop(writer.commit(row(1), rows=1))
    finally:
        await writer.close()


async def test_a_commit_of_few_rows_goes_to_the_thread_once_the_loop_knows_their_cost(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "w.db", "test log", inline_row_cost=1e-12)
    await writer.open()
    await writer.script(TABLE)
    try:
        assert not await gave_up_the_loop(writer.commit(row(1), rows=1))  # nothing known yet: on the loop
        assert writer.commits_inline
        assert await gave_up_the_loop(writer.commit(row(2), rows=1))  # a whole commit's time for one row
    finally:
        await writer.close()
    assert [k for k, _ in stored(tmp_path / "w.db")] == [1, 2]


async def test_a_commit_of_few_rows_stays_on_the_loop_where_commits_write_many(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "w.db", "test log", inline_row_cost=1e-6)  # a commit's time for one row
    await writer.open()
    await writer.script(TABLE)
    try:
        for key in range(8):  # as sessions make them: each counts many rows, each pays for its fsync
            assert not await gave_up_the_loop(writer.commit(row(key), rows=100_000))
        assert not await gave_up_the_loop(writer.commit(row(8), rows=1))  # an odd small one among them
    finally:
        await writer.close()
    assert [k for k, _ in stored(tmp_path / "w.db")] == list(range(9))


@pytest.mark.parametrize("inline_budget", [1.0, 0.0], ids=["on the loop", "in the thread"])
async def test_failed_commits_change_nothing_and_say_why(tmp_path: Path, inline_budget: float) -> None:
    path = tmp_path / "w.db"
    writer = Writer(path, "test log", max_bytes=64 * 1024, inline_budget=inline_budget, inline_row_cost=1.0)
    await writer.open()
    await writer.script(TABLE)
    try:
        await writer.commit(row(1), rows=1)
        with pytest.raises(DuplicateRowError, match="same key"):
            await writer.commit(row(2), row(1), rows=2)
        with pytest.raises(StorageFullError, match=r"is full \(its cap is 65,536 bytes\)"):
            await writer.commit(*(row(k, "x" * 4000) for k in range(10, 40)), rows=30)
        await writer.commit(row(2), rows=1)  # no transaction was left open
    finally:
        await writer.close()
    assert stored(tmp_path / "w.db") == [(1, "v"), (2, "v")]
