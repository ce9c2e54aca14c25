"""The revision log's writing connection: group commits on the event loop where that is cheap, everything
else in the connection's own thread.

A group commit handed to a worker thread waits for the thread to be scheduled and to get the GIL from a
busy event loop, then for the loop to resume it: on the reference machine (2 cores shared with the load)
that is several milliseconds a commit, ten times the SQL and the fsync themselves, and callers in a closed
loop (an agent waits for its answer before its next patch) wait through it. Run on the loop's own thread,
the commit holds the loop for the SQL and the fsync instead (a third of a millisecond for 24 revisions
there; 5 ms at most with SQLite's automatic checkpoints). That pays where a batch is large: a commit runs
on the loop only if its moving-average time there is at most `INLINE_ROW_COST` per row it writes, so a
loop saturated by small batches (unary calls) is not stopped for a whole fsync per few requests: those go
to the thread and their batches grow meanwhile. Large commits (over `INLINE_BYTES`), compactions, new
executions and schema changes always run in the thread. A disk that turns slow would hold the loop for
each fsync: one commit on the loop that takes longer than `INLINE_BUDGET` sends every commit to the thread
for the next `COOL_DOWN` seconds (logged).

The connection is used by one side at a time: work queued for the thread runs in order, and a commit runs
on the loop only while the thread has nothing queued or running, so it never overtakes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import StorageError
from .sqlite import SETTINGS, Statement, write_error

log = logging.getLogger(__name__)

INLINE_BYTES = 256 * 1024
"""A group commit whose values (the text of its rows) total more than this runs in the thread."""
INLINE_BUDGET = 0.010
"""Seconds a commit on the event loop may take before commits move to the thread for a while (0: every
commit runs in the thread)."""
COOL_DOWN = 60.0
"""Seconds commits stay in the thread after one on the loop went over `INLINE_BUDGET`."""
INLINE_ROW_COST = 50e-6
"""Seconds of the loop's time a commit on it may cost per row it writes (about a sixth of what a unary
call costs the loop there): a commit of fewer rows than its expected time allows goes to the thread."""

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
        self._queued, self._finished = itertools.count(1), 0
        self._last_queued = 0
        """Thread jobs queued and finished (each written by one side only): equal when the thread is idle."""
        self._in_thread_until = 0.0
        """Loop time before which every commit goes to the thread (a commit on the loop was too slow)."""
        self._inline_seconds = 0.0
        """A moving average of how long a commit on the loop takes."""

    @property
    def commits_inline(self) -> bool:
        """Whether commits may run on the event loop now: not with a zero budget, nor for `COOL_DOWN` after a
        slow one."""
        return self._inline_budget > 0 and asyncio.get_running_loop().time() >= self._in_thread_until

    async def open(self) -> None:
        """Connect and apply the settings (in the thread: opening may recover a large WAL); idempotent."""
        if self._connection is not None:
            return
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="skillstate-sqlite-writer")
        try:
            self._connection = await self._in_thread(self._connect)
        except BaseException:
            self._thread.shutdown()
            self._thread = None
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StorageError(f"cannot open {self.path}: {e}") from e
        try:
            connection.executescript(SETTINGS)
            if self._max_bytes is not None:
                (page_size,) = connection.execute("PRAGMA page_size").fetchone()
                connection.execute(f"PRAGMA max_page_count = {max(1, self._max_bytes // page_size)}")
        except sqlite3.Error as e:
            connection.close()
            raise StorageError(f"cannot open {self.path}: {e}") from e
        return connection

    async def close(self) -> None:
        connection, thread = self._connection, self._thread
        self._connection = self._thread = None
        if connection is not None:
            await asyncio.get_running_loop().run_in_executor(thread, connection.close)
        if thread is not None:
            thread.shutdown()

    async def value(self, sql: str, *params: Any) -> Any:
        """The first column of the first row, or None when there is no row (in the thread)."""
        connection = self._open_connection

        def query() -> Any:
            try:
                row = connection.execute(sql, params).fetchone()
            except sqlite3.Error as e:
                raise StorageError(f"{self._what}: read from {self.path} failed: {e}") from e
            return row[0] if row else None

        return await self._in_thread(query)

    async def script(self, sql: str) -> None:
        """Run statements separated by semicolons (tables, pragmas) outside any transaction (in the thread)."""
        connection = self._open_connection

        def run() -> None:
            try:
                connection.executescript(sql)
            except sqlite3.Error as e:
                raise StorageError(f"{self._what}: {self.path}: {e}") from e

        await self._in_thread(run)

    async def transaction(self, *statements: Statement | None) -> None:
        """Run the statements (None ones skipped) atomically, in the thread."""
        present = [s for s in statements if s is not None]
        await self._in_thread(lambda: self._write(present))

    async def commit(self, *statements: Statement | None, rows: int) -> None:
        """`transaction` for a group commit of `rows` rows: on the event loop where the module's docstring
        says it pays, in the thread otherwise."""
        present = [s for s in statements if s is not None]
        loop = asyncio.get_running_loop()
        if (
            self._finished != self._last_queued  # the thread is using the connection
            or not self.commits_inline
            or rows * self._inline_row_cost < self._inline_seconds
            or _size(present) > INLINE_BYTES
        ):
            await self._in_thread(lambda: self._write(present))
            return
        started = time.perf_counter()
        try:
            self._write(present)
        finally:
            took = time.perf_counter() - started
            self._inline_seconds += (took - self._inline_seconds) / 8
            if took > self._inline_budget:
                self._in_thread_until = loop.time() + self._cool_down
                log.warning(
                    "a commit to %s held the event loop for %.1f ms, over its budget of %.1f ms: commits run "
                    "in the writer's thread for the next %.0f s",
                    self.path, took * 1e3, self._inline_budget * 1e3, self._cool_down,
                )  # fmt: skip

    def _write(self, statements: list[Statement]) -> None:
        """The statements alone in autocommit when there is one, else between BEGIN IMMEDIATE and COMMIT."""
        connection = self._open_connection
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
            raise write_error(e, self._what, self.path, self._max_bytes) from e

    async def _in_thread(self, job: Callable[[], T]) -> T:
        """Run `job` in the connection's thread, after what is queued there. The job runs to its end even if
        the caller is cancelled (a transaction is one job, so it is never left half done)."""
        if self._thread is None:
            raise StorageError(f"the {self._what} is not open")
        self._last_queued = next(self._queued)

        def run() -> T:
            try:
                return job()
            finally:
                self._finished += 1  # only this thread writes it

        # shielded: cancelling a job still queued would drop it, and with it the count of finished jobs
        return await asyncio.shield(asyncio.get_running_loop().run_in_executor(self._thread, run))

    @property
    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StorageError(f"the {self._what} is not open")
        return self._connection


def _size(statements: list[Statement]) -> int:
    """The bytes of text a write carries (its rows' JSON and names), roughly what it adds to the WAL."""
    return sum(len(value) for _, params in statements for value in params if isinstance(value, str))
