"""Three-way merge of concurrent edits of one string, on pycrdt's Text CRDT.

Each edit is the diff from the common original to one writer's text (textdiff.py), replayed by its own
CRDT client; the CRDT merges them. Client ids are assigned by sorting the edits by stamp, so the same set
of edits always yields the same string, whatever order they arrived in.

What a merge costs is bounded before it is paid (`Limits.max_text_diff_cells`, `max_text_merge_edits`):
past a bound it is refused with LimitExceededError. `TextMerges` keeps large merges off the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass

from pycrdt import Doc, Text

from ..errors import LimitExceededError
from ..limits import DEFAULT_LIMITS, Limits
from .textdiff import Edit, cells, spans
from .textdiff import edits as diff_edits

_ROOT = "text"


@dataclass(frozen=True, slots=True)
class TextEdit:
    """One writer's version of the string; stamp and client_patch_id order concurrent writers."""

    stamp: tuple[int, str]
    client_patch_id: str
    text: str


def merge_text(original: str, edits: Sequence[TextEdit], limits: Limits = DEFAULT_LIMITS) -> str:
    """Merge every edit of `original`; inserts at one position come out in stamp order.

    Edits that produce the same text are one edit: two writers making the same change make it once.
    """
    first_of_each_text: dict[str, TextEdit] = {}
    for edit in sorted(edits, key=lambda e: (e.stamp, e.client_patch_id, e.text)):
        first_of_each_text.setdefault(edit.text, edit)  # the same edit made twice counts once
    ordered = list(first_of_each_text.values())
    differing = [spans(original, edit.text) for edit in ordered]
    cost = sum(cells(s) for s in differing)
    if cost > limits.max_text_diff_cells:
        raise LimitExceededError(
            f"text merge: diffing these edits of a {len(original):,}-character string would cost {cost:,} cells, "
            f"over the limit of {limits.max_text_diff_cells:,} (max_text_diff_cells): re-read and write smaller edits",
            limit="max_text_diff_cells",
            limit_value=limits.max_text_diff_cells,
        )
    scripts = [diff_edits(s) for s in differing]
    count = sum(map(len, scripts))
    if count > limits.max_text_merge_edits:
        raise LimitExceededError(
            f"text merge: the edits make {count:,} changes to the string, over the limit of "
            f"{limits.max_text_merge_edits:,} (max_text_merge_edits): re-read and write fewer changes at once",
            limit="max_text_merge_edits",
            limit_value=limits.max_text_merge_edits,
        )
    seed: Doc[Text] = Doc(client_id=1)
    if original:
        seed.get(_ROOT, type=Text).insert(0, original)
    seed_update, seed_state = seed.get_update(), seed.get_state()
    merged: Doc[Text] = Doc(client_id=1)
    merged.apply_update(seed_update)
    for client_id, script in enumerate(scripts, start=2):
        writer: Doc[Text] = Doc(client_id=client_id)
        writer.apply_update(seed_update)
        _replay(writer.get(_ROOT, type=Text), original, script)
        merged.apply_update(writer.get_update(seed_state))
    return str(merged.get(_ROOT, type=Text))


def _replay(text: Text, original: str, edits: list[Edit]) -> None:
    """Turn `text` (holding original) into the edited string, back to front so earlier offsets stay valid."""
    offsets = _utf8_offsets(original, sorted({i for start, end, _ in edits for i in (start, end)}))
    for start, end, inserted in reversed(edits):
        if end > start:
            del text[offsets[start] : offsets[end]]
        if inserted:
            text.insert(offsets[start], inserted)


def _utf8_offsets(s: str, positions: list[int]) -> dict[int, int]:
    """UTF-8 byte offsets (pycrdt indexes Text by bytes) of the ascending character positions."""
    offsets, at, byte = {}, 0, 0
    for position in positions:
        byte += len(s[at:position].encode())
        offsets[position], at = byte, position
    return offsets


class Deferred(Exception):
    """A text merge too large to run on the event loop: `TextMerges.run` it, then merge again."""

    def __init__(self, key: _Key, original: str, edits: Sequence[TextEdit]) -> None:
        super().__init__("a large text merge is computed off the event loop")
        self.key, self.original, self.edits = key, original, edits


_Key = tuple[str, tuple[tuple[tuple[int, str], str, str], ...]]


class TextMerges:
    """The engine's text merges: small ones at once, large ones in a worker thread.

    A merge (merge.py) runs on the event loop with no await, so that it sees exactly the head it commits
    on. A text merge larger than INLINE_CHARS raises Deferred instead; the engine awaits `run`, which
    computes it in the worker and keeps the result (or its refusal), then merges again from the start:
    the same text merge is then answered from what was kept. merge_text is a pure function of its inputs,
    so where it ran never changes the result.
    """

    INLINE_CHARS = 16_384
    INLINE_CELLS = 250_000
    """A merge of strings at most INLINE_CHARS long in all (the original and every edit) whose diffs cost
    at most INLINE_CELLS (textdiff.cells: about 10 ns each) runs on the loop, in a few milliseconds at
    most; any other goes to the worker. Length alone is not enough: 16K characters that differ everywhere
    cost 25M cells (a quarter of a second)."""
    KEPT = 16
    """Finished large merges kept for the merge that asked for them (each up to a few MiB)."""

    def __init__(self, limits: Limits, worker: concurrent.futures.Executor | None = None) -> None:
        self._limits = limits
        self._owns_worker = worker is None
        self._worker = worker or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="skillstate-text-merge")
        self._done: collections.OrderedDict[_Key, str | LimitExceededError] = collections.OrderedDict()
        self._running: dict[_Key, asyncio.Future[None]] = {}

    def __call__(self, original: str, edits: Sequence[TextEdit]) -> str:
        if self._inline(original, edits):
            return merge_text(original, edits, self._limits)
        key: _Key = (original, tuple(sorted((e.stamp, e.client_patch_id, e.text) for e in edits)))
        done = self._done.get(key)
        if done is None:
            raise Deferred(key, original, edits)
        if isinstance(done, LimitExceededError):
            raise done
        return done

    def _inline(self, original: str, edits: Sequence[TextEdit]) -> bool:
        if len(original) + sum(len(edit.text) for edit in edits) > self.INLINE_CHARS:
            return False
        return sum(cells(spans(original, edit.text)) for edit in edits) <= self.INLINE_CELLS

    async def run(self, deferred: Deferred) -> None:
        """Compute a deferred merge in the worker (concurrent requests for the same one share it)."""
        running = self._running.get(deferred.key)
        if running is None:
            loop = asyncio.get_running_loop()
            running = self._running[deferred.key] = loop.create_future()
            try:
                result: str | LimitExceededError = await loop.run_in_executor(
                    self._worker, merge_text, deferred.original, deferred.edits, self._limits
                )
            except LimitExceededError as refused:
                result = refused
            finally:
                del self._running[deferred.key]
                running.set_result(None)
            self._done[deferred.key] = result
            while len(self._done) > self.KEPT:
                self._done.popitem(last=False)
        await running

    def close(self) -> None:
        if self._owns_worker:
            self._worker.shutdown(wait=True, cancel_futures=True)
