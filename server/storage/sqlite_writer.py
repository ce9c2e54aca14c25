"""The revision log's writing connection: group commits on the event loop where that is cheap, everything
else in the connection's own thread.

A group commit handed to a worker thread waits for the thread to be scheduled and to get the GIL from a busy
event loop, then for the loop to resume it: several milliseconds a commit on a machine whose cores are busy,
many times the SQL and the fsync themselves, and agents in a closed loop (each waits for its answer before its
next patch) wait through it. On the loop's own thread the commit holds the loop for its SQL and fsync instead,
which pays where batches are large: a commit runs there only if its moving-average time there is at most
`INLINE_ROW_COST` per row it writes, counting its rows or the moving average of rows per commit, whichever is
more (a loop saturated by small batches, as unary calls make, is not stopped for a whole fsync per few
requests, and their batches grow in the thread; where batches are large, as sessions make them, an odd small
one stays on the loop too, rather than keep the thread, and with it the batches behind it, busy), and once
every `PROBE_INTERVAL` to keep that average current. It never waits there for SQLite's write lock (held by
another store's connection to the same file): a busy database sends the commit to the thread, which tries
again for up to the busy timeout. Large commits (over `INLINE_BYTES`), compactions, new executions and schema
changes always run in the thread. A disk that turns slow would hold the loop for each fsync: `SLOW_OF_RECENT`
of the last `RECENT` commits on the loop taking longer than `INLINE_BUDGET` each send every commit to the
thread for the next `COOL_DOWN` seconds (logged). One slow commit alone does not: on a busy machine the loop's
thread is now and then descheduled in the middle of one, which says nothing about the disk.
docs/performance.md has the measurements.

The connection is used by one side at a time: jobs queued for the thread run in order, and a commit runs
on the loop only while the thread has nothing queued or running, so it never overtakes one.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import StorageError
from .sqlite import BUSY_TIMEOUT_MS, SETTINGS, Statement, write_error

log = logging.getLogger(__name__)

INLINE_BYTES = 256 * 1024
"""A group commit whose values (the text of its rows) total more than this runs in the thread."""
INLINE_BUDGET = 0.010
"""Seconds a commit on the event loop may take before commits move to the thread for a while (0: every
commit runs in the thread)."""
COOL_DOWN = 60.0
"""Seconds commits stay in the thread after `SLOW_OF_RECENT` of the last `RECENT` on the loop went over
`INLINE_BUDGET`."""
SLOW_OF_RECENT, RECENT = 3, 8
"""Commits on the loop over `INLINE_BUDGET`, of the last ones on the loop, that send commits to the thread: a
disk that stalls now and then trips it as surely as one that stalls on every commit."""
INLINE_ROW_COST = 50e-6
"""Seconds of the loop's time a commit on it may cost per row it writes (about a sixth of what a unary
call costs the loop): a commit of fewer rows than its expected time allows, where commits write as few
on average, goes to the thread."""
PROBE_INTERVAL = 1.0
"""Seconds after which a commit runs on the loop whatever its rows, to measure that cost again."""

T = TypeVar("T")


class Writer:
    """The one connection that writes a SQLite file, in autocommit mode, with its own worker thread."""

    def __init__(
        self,
        path: str | Path,
        what: str,
        max_bytes: int | None = None,
        inline_budget: float = INLINE_BUDGET,
        cool_down: float = COOL_DOWN,
        inline_row_cost: float = INLINE_ROW_COST,
    ) -> None:
        self.path, self._what, self._max_bytes = str(path), what, max_bytes
        self._inline_budget, self._cool_down, self._inline_row_cost = inline_budget, cool_down, inline_row_cost
        self._connection: sqlite3.Connection | None = None
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._queued = self._finished = 0
        """Jobs queued for the thread, and finished by it (each written by one side only): equal when idle."""
        self._in_thread_until = 0.0
        """Loop time before which every commit goes to the thread (a commit on the loop was too slow)."""
        self._inline_seconds = 0.0
        """A moving average of how long a commit on the loop takes."""
        self._inline_at = float("-inf")
        """Loop time of the last commit on the loop."""
        self._rows_per_commit = 0.0
        """A moving average of the rows a group commit writes."""
        self._recent_slow: collections.deque[bool] = collections.deque(maxlen=RECENT)
        """Whether each of the last commits on the loop went over the budget."""

    @property
    def commits_inline(self) -> bool:
        """Whether commits may run on the event loop now: not with a zero budget, nor for `COOL_DOWN` after a
        slow one."""
        return self._inline_budget > 0 and asyncio.get_running_loop().time() >= self._in_thread_until

    async def open(self) -> None:
        """Connect and apply the settings (in the thread: opening may recover a large WAL); idempotent."""
        if self._connection is not None:
            return
        thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="skillstate-sqlite-writer")
        connecting = asyncio.get_running_loop().run_in_executor(thread, self._connect)
        try:
            self._connection = await asyncio.shield(connecting)
        except BaseException:
            connecting.add_done_callback(_close_connected)  # one that opens after a cancel is closed
            thread.shutdown(wait=False)
            raise
        self._thread = thread

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StorageError(f"cannot open {self.path}: {e}") from e
        try:
            connection.executescript(SETTINGS + "PRAGMA busy_timeout = 0;")  # the thread waits itself (_in_thread)
            if self._max_bytes is not None:
                (page_size,) = connection.execute("PRAGMA page_size").fetchone()
                connection.execute(f"PRAGMA max_page_count = {max(1, self._max_bytes // page_size)}")
        except sqlite3.Error as e:
            connection.close()
            raise StorageError(f"cannot open {self.path}: {e}") from e
        return connection

    async def close(self) -> None:
        """Close once the jobs queued before have run."""
        connection, thread = self._connection, self._thread
        self._connection = self._thread = None
        if thread is None:
            return
        try:
            if connection is not None:
                await asyncio.shield(asyncio.get_running_loop().run_in_executor(thread, connection.close))
        finally:
            thread.shutdown(wait=False)  # its thread ends once its queue is done

    async def value(self, sql: str, *params: Any) -> Any:
        """The first column of the first row, or None when there is no row (in the thread)."""

        def query(connection: sqlite3.Connection) -> Any:
            try:
                row = connection.execute(sql, params).fetchone()
            except sqlite3.Error as e:
                _raise_if_busy(e)
                raise StorageError(f"{self._what}: read from {self.path} failed: {e}") from e
            return row[0] if row else None

        return await self._in_thread(query)

    async def script(self, sql: str) -> None:
        """Run statements separated by semicolons (tables, pragmas; a script may hold its own BEGIN and
        COMMIT), in the thread."""

        def run(connection: sqlite3.Connection) -> None:
            try:
                connection.executescript(sql)
            except sqlite3.Error as e:
                _raise_if_busy(e)
                raise StorageError(f"{self._what}: {self.path}: {e}") from e

        await self._in_thread(run)

    async def transaction(self, *statements: Statement | None) -> None:
        """Run the statements (None ones skipped) atomically, in the thread."""
        present = [s for s in statements if s is not None]
        await self._in_thread(lambda connection: self._write(connection, present))

    async def commit(self, *statements: Statement | None, rows: int) -> None:
        """`transaction` for a group commit of `rows` rows: on the event loop where the module's docstring
        says it pays, in the thread otherwise."""
        present = [s for s in statements if s is not None]
        loop, connection = asyncio.get_running_loop(), self._open_connection
        probing = loop.time() - self._inline_at >= PROBE_INTERVAL
        self._rows_per_commit += (rows - self._rows_per_commit) / 8
        if (
            self._finished != self._queued  # the thread is using the connection
            or not self.commits_inline
            or (max(rows, self._rows_per_commit) * self._inline_row_cost < self._inline_seconds and not probing)
            or _size(present) > INLINE_BYTES
        ):
            await self.transaction(*present)
            return
        started = time.perf_counter()
        try:
            self._write(connection, present)
        except _Busy:
            await self.transaction(*present)  # another connection holds the write lock: wait in the thread
            return
        took = time.perf_counter() - started
        self._inline_at = loop.time()
        self._inline_seconds += (took - self._inline_seconds) / 8
        self._recent_slow.append(took > self._inline_budget)
        if self._recent_slow.count(True) >= SLOW_OF_RECENT:
            self._recent_slow.clear()
            self._in_thread_until = loop.time() + self._cool_down
            log.warning(
                "%d of the last %d commits to %s held the event loop for over their budget of %.1f ms (the last "
                "%.1f ms): commits run in the writer's thread for the next %.0f s",
                SLOW_OF_RECENT, RECENT, self.path, self._inline_budget * 1e3, took * 1e3, self._cool_down,
            )  # fmt: skip

    def _write(self, connection: sqlite3.Connection, statements: list[Statement]) -> None:
        """The statements alone in autocommit when there is one, else between BEGIN IMMEDIATE and COMMIT.
        Raises _Busy, having written nothing, if another connection holds the write lock."""
        try:
            if len(statements) == 1:
                connection.execute(*statements[0])
                return
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in statements:
                    connection.execute(*statement)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:  # SQLite ends it by itself after some errors
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            _raise_if_busy(e)
            raise write_error(e, self._what, self.path, self._max_bytes) from e

    async def _in_thread(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run `job` on the connection in the thread, after what is queued there; while another connection
        holds the write lock, again after a pause, for up to the busy timeout (SQLite's own wait is off,
        for the loop's sake). The job runs to its end even if the caller is cancelled (a transaction is one
        job, so it is never left half done)."""
        connection, thread = self._open_connection, self._thread
        assert thread is not None, "open with its connection"
        self._queued += 1

        def run() -> T:
            try:
                give_up_at, pause = time.monotonic() + BUSY_TIMEOUT_MS / 1000, 0.001
                while True:
                    try:
                        return job(connection)
                    except _Busy as busy:  # nothing was done: a job fails whole
                        if time.monotonic() + pause > give_up_at:
                            raise StorageError(f"{self._what}: {self.path} is locked by another connection") from busy
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
            finally:
                self._finished += 1  # only this thread writes it

        # shielded: cancelling a job still queued would drop it, and with it the count of finished jobs
        return await asyncio.shield(asyncio.get_running_loop().run_in_executor(thread, run))

    @property
    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StorageError(f"the {self._what} is not open")
        return self._connection


class _Busy(Exception):
    """Another connection holds the database's write lock (on the loop, the writer does not wait for it)."""


def _raise_if_busy(error: sqlite3.Error) -> None:
    if getattr(error, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY:  # any of its extended codes
        raise _Busy() from error


def _size(statements: list[Statement]) -> int:
    """The bytes of text a write carries (its rows' JSON and names), roughly what it adds to the WAL."""
    return sum(len(value) for _, params in statements for value in params if isinstance(value, str))


def _close_connected(connecting: asyncio.Future[sqlite3.Connection]) -> None:
    if not connecting.cancelled() and connecting.exception() is None:
        connecting.result().close()
