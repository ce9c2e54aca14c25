"""Character diffs of a string from its original, at a cost known before it is paid.

Myers' diff (Google's diff-match-patch in C++, its time-out off so that the result never depends on
machine speed) costs up to the product of the lengths it compares when two strings differ everywhere. So
only spans that still differ after two cheap steps reach it: the common prefix and suffix are cut off, and
lines (or, in a string of one line, words) that occur exactly once in both strings are matched in order
(patience diff), splitting the rest into gaps that are diffed the same way. A span that Myers compares
costs at most (len(a) + len(b))² / 4 cells, so what a diff will cost is known before any of that work is
done (`cells` is the bound, `edits` does the work). The C++ diff releases the GIL, so a diff run in a
worker thread leaves the event loop free.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import re
from collections.abc import Iterator
from typing import Any

import fast_diff_match_patch

Edit = tuple[int, int, str]
"""Replace original[start:end] with the text; a diff is a list of them, in order, not overlapping."""
_WORD = re.compile(r"\s*\S+\s*|\s+")
"""Words with the spaces around them: the parts of a string with no lines to split at."""
_SPACE = " \t\n"
ANCHOR_FROM_CELLS = 1_000_000
"""Spans cheaper than this go to Myers at once; larger ones are first split at unique lines."""
Span = tuple[str, int, str]
"""A part of the original (from its offset) and the text that replaces it, still to be diffed."""


def spans(original: str, text: str) -> list[Span]:
    """Where `text` still differs from `original` once common ends and unique lines are matched (cheap)."""
    return [(a, at, b) for a, at, b, _ in _spans(original, text, 0, 0)]


def cells(differing: list[Span]) -> int:
    """What diffing the spans costs at most: the bound a caller checks before calling `edits`."""
    return sum(_cells(a, b) for a, _, b in differing)


def edits(differing: list[Span]) -> list[Edit]:
    """The edits that turn the original into the text, by Myers' diff of each span."""
    return [edit for a, at, b in differing for edit in _myers(a, at, b)]


def _cells(a: str, b: str) -> int:
    return (len(a) + len(b)) ** 2 // 4


def _spans(a: str, b: str, a_at: int, b_at: int) -> Iterator[tuple[str, int, str, int]]:
    """The spans of a (starting at a_at of the original) and b that still differ, in order: what is left
    after cutting the common prefix and suffix, split at lines unique to both."""
    if a == b:
        return
    prefix = _at_boundary(a[: _common_prefix(a, b)], from_end=False)
    suffix = _at_boundary(_common_suffix(a[prefix:], b[prefix:]), from_end=True)
    a, b = a[prefix : len(a) - suffix], b[prefix : len(b) - suffix]
    a_at, b_at = a_at + prefix, b_at + prefix
    if not a and not b:
        return
    if not a or not b or _cells(a, b) < ANCHOR_FROM_CELLS:
        yield a, a_at, b, b_at
        return
    anchors = _unique_anchors(a.splitlines(keepends=True), b.splitlines(keepends=True)) or _unique_anchors(
        _WORD.findall(a), _WORD.findall(b)
    )
    if not anchors:
        yield a, a_at, b, b_at
        return
    a_from = b_from = 0
    for a_start, a_end, b_start, b_end in anchors:
        yield from _spans(a[a_from:a_start], b[b_from:b_start], a_at + a_from, b_at + b_from)
        a_from, b_from = a_end, b_end
    yield from _spans(a[a_from:], b[b_from:], a_at + a_from, b_at + b_from)


def _at_boundary(common: str, from_end: bool) -> int:
    """How much of a common prefix (or, from_end, suffix) to cut: only whole words and lines. Cutting
    within a word leaves the diff to align what is left of it with something else ("agent-5" and
    "agent-0" share "agent-"), and a concurrent edit inside that word would then land in pieces."""
    if from_end:  # keep what follows the first space: the suffix then starts a word
        first = min((i for i in (common.find(ch) for ch in _SPACE) if i >= 0), default=len(common))
        return len(common) - first - 1 if first < len(common) else 0
    return max(common.rfind(ch) for ch in _SPACE) + 1  # up to and with the last space


def _common_suffix(a: str, b: str) -> str:
    return a[len(a) - _common_prefix(a[::-1], b[::-1]) :]


def _common_prefix(a: str, b: str) -> int:
    """The length of the common prefix, by binary search over slice comparisons (each at memcmp speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _unique_anchors(a_parts: list[str], b_parts: list[str]) -> list[tuple[int, int, int, int]]:
    """(start, end) in a and in b of parts (lines, or words) that occur exactly once in each, the longest
    run of them that is in the same order in both. The parts of each string join to the whole string."""
    a_count, b_count = collections.Counter(a_parts), collections.Counter(b_parts)
    b_index = {part: i for i, part in enumerate(b_parts) if b_count[part] == 1 and a_count[part] == 1}
    pairs = [(i, b_index[part]) for i, part in enumerate(a_parts) if part in b_index]
    if not pairs:
        return []
    a_offsets = [0, *itertools.accumulate(map(len, a_parts))]
    b_offsets = [0, *itertools.accumulate(map(len, b_parts))]
    return [(a_offsets[i], a_offsets[i + 1], b_offsets[j], b_offsets[j + 1]) for i, j in _increasing_run(pairs)]


def _increasing_run(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of pairs (ascending in their first item) ascending in the second too
    (patience sorting, O(n log n)); ties go to the earliest pairs, so the result is deterministic."""
    tails: list[int] = []
    tail_at: list[int] = []
    previous = [-1] * len(pairs)
    for index, (_, second) in enumerate(pairs):
        pile = bisect.bisect_left(tails, second)
        if pile == len(tails):
            tails.append(second)
            tail_at.append(index)
        else:
            tails[pile] = second
            tail_at[pile] = index
        previous[index] = tail_at[pile - 1] if pile else -1
    run = []
    index = tail_at[-1]
    while index != -1:
        run.append(pairs[index])
        index = previous[index]
    return run[::-1]


def _myers(a: str, a_at: int, b: str) -> list[Edit]:
    """Myers' diff of a span, as edits of the original (a starts at a_at). Text with lines is diffed line
    by line first, and only lines replaced by others are diffed character by character: an inserted or
    deleted line stays whole, so a concurrent edit next to it stays whole too."""
    if not a or not b:
        return [(a_at, a_at + len(a), b)]
    if "\n" not in a and "\n" not in b:
        return _characters(a, a_at, b)
    a_lines, b_lines = a.splitlines(keepends=True), b.splitlines(keepends=True)
    codes: dict[str, str] = {}
    encoded_a, encoded_b = _encode(a_lines, codes), _encode(b_lines, codes)
    edits: list[Edit] = []
    a_offsets = list(itertools.accumulate(map(len, a_lines), initial=a_at))
    for start, end, (b_start, b_end) in _characters(encoded_a, 0, encoded_b, b_positions=True):
        old, new = "".join(a_lines[start:end]), "".join(b_lines[b_start:b_end])
        if old and new:
            edits.extend(_characters(old, a_offsets[start], new))
        else:
            edits.append((a_offsets[start], a_offsets[end], new))
    return edits


def _encode(lines: list[str], codes: dict[str, str]) -> str:
    """Each distinct line as one character (outside the surrogates), the same character for equal lines."""
    for line in lines:
        if line not in codes:
            index = len(codes) + 1
            codes[line] = chr(index if index < 0xD800 else index + 0x800)
    return "".join(codes[line] for line in lines)


def _characters(a: str, a_at: int, b: str, b_positions: bool = False) -> list[Any]:
    """Myers' minimal diff, character by character, as edits (start, end, inserted text); with
    b_positions, as (start, end, (b start, b end)) instead of the inserted text."""
    edits: list[Any] = []
    a_pos, b_pos = a_at, 0
    start: int | None = None
    b_start = 0
    for op, length in fast_diff_match_patch.diff(
        a, b, timelimit=0, checklines=False, cleanup="Lossless", counts_only=True
    ):
        if op == "=":
            if start is not None:
                edits.append((start, a_pos, (b_start, b_pos) if b_positions else b[b_start:b_pos]))
                start = None
            a_pos, b_pos = a_pos + length, b_pos + length
            continue
        if start is None:
            start, b_start = a_pos, b_pos
        if op == "-":
            a_pos += length
        else:
            b_pos += length
    if start is not None:
        edits.append((start, a_pos, (b_start, b_pos) if b_positions else b[b_start:b_pos]))
    return edits
