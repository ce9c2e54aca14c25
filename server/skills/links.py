"""Relative links in a SKILL.md body: what a package points at, with the line that points."""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from .markdown import fenced

_BRACKET = re.compile(r"[][]")
_TARGET_STOP = re.compile(r"[)\s>]")
_DESTINATION_OPENING = re.compile(r"\(\s*")
_TITLE_OPENING = re.compile(r"\s+[\"'(]")
_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s+.*)?$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True, slots=True)
class Link:
    target: str
    """The link as written, without its #fragment or ?query, percent-decoded."""
    line: int
    """1-based line of the body it is on."""


def relative_links(body: str) -> Iterator[Link]:
    """Links to files (not URLs, anchors or absolute paths), outside fenced code, in order of appearance."""
    if "](" not in body and "]:" not in body:  # neither an inline link nor a definition
        return
    lines = body.split("\n")
    for number, (line, in_code) in enumerate(zip(lines, fenced(lines), strict=True), start=1):
        if in_code:
            continue
        targets = list(_inline_targets(line)) if "](" in line else []
        definition = _DEFINITION.match(line)
        if definition:
            targets.append(definition["target"])
        for target in targets:
            path = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if path and not _SCHEME.match(path) and not path.startswith("/"):
                yield Link(path, number)


def resolve(folder: str, target: str) -> str:
    """The map key a link from a SKILL.md in `folder` points at ('..' segments left only if it escapes)."""
    return posixpath.normpath(posixpath.join(folder, target))


def _inline_targets(line: str) -> Iterator[str]:
    """The targets of a line's inline links and images, left to right, in time O(n log n) in its length.

    They are what `!?\\[(?:[^\\[\\]]|\\[[^\\]]*\\])*\\]\\(\\s*<?(?P<target>[^)\\s>]+)>?(?:\\s+["'(][^)]*)?\\)`
    finds with `finditer`, whose backtracking took time quadratic in a line of many `[` or `](`. A label is text
    and `[...]` groups (a group ends at the first `]`, whatever `[` it holds), so from a `[` it ends at the next
    `]` if no `[` comes between, else at the first later `]` with no `[` since the one before. The destination is
    `(`, blanks, an optional `<` (part of the target if nothing else is), the target up to a blank, `)` or `>`,
    an optional `>`, an optional title (blanks, then `"`, `'` or `(`, up to the first `)`), and `)`. An image's
    `!` changes nothing; the scan resumes after each link.
    """
    closes = _closes(line)
    next_bare: list[int | None] = [None]  # [k]: the first `]` from the k-th on with no `[` since the one before
    for opens, close in reversed(closes):
        next_bare.append(next_bare[-1] if opens else close)
    next_bare.reverse()
    destinations = _Destinations(line)
    resume = 0
    for k, (opens, close) in enumerate(closes):
        starts = len(opens) - bisect_left(opens, resume)  # the `[` before this `]` that a link may start at
        if not starts:
            continue
        # each `[` but the last holds this `]` as a group's end, so its label ends at the next bare `]`
        label_ends = (next_bare[k + 1], close) if starts > 1 else (close,)
        for label_end in label_ends:
            link = None if label_end is None else destinations.after(label_end)
            if link:
                target, resume = link
                yield target
                break


def _closes(line: str) -> list[tuple[list[int], int]]:
    """Each `]` of the line, with the positions of the `[` between it and the `]` before it."""
    closes: list[tuple[list[int], int]] = []
    opens: list[int] = []
    for bracket in _BRACKET.finditer(line):
        if bracket.group() == "[":
            opens.append(bracket.start())
        else:
            closes.append((opens, bracket.start()))
            opens = []
    return closes


class _Destinations:
    """What follows the labels of one line. Many `[` may share a label's end and many labels a target's end:
    each is looked at once, or the blanks after it would be read again for each."""

    def __init__(self, line: str) -> None:
        self._line = line
        self._target_stops = [stop.start() for stop in _TARGET_STOP.finditer(line)]
        self._last_parenthesis = line.rfind(")")
        self._links: dict[int, tuple[str, int] | None] = {}
        self._ends: dict[int, int | None] = {}

    def after(self, label_end: int) -> tuple[str, int] | None:
        """The target of the link whose label ends at this `]`, and the position after the link, if it is one."""
        if label_end not in self._links:
            self._links[label_end] = self._link(label_end)
        return self._links[label_end]

    def _link(self, label_end: int) -> tuple[str, int] | None:
        line = self._line
        opening = _DESTINATION_OPENING.match(line, label_end + 1)
        if not opening:
            return None
        start = opening.end()
        stop = bisect_left(self._target_stops, start)
        target_end = self._target_stops[stop] if stop < len(self._target_stops) else len(line)
        if target_end == start:
            return None
        if line[start] == "<" and target_end > start + 1:
            start += 1
        if target_end not in self._ends:
            self._ends[target_end] = self._end(target_end)
        end = self._ends[target_end]
        return None if end is None else (line[start:target_end], end)

    def _end(self, target_end: int) -> int | None:
        """The position after a link whose target ends here: after `)`, `>)` or a title's `)`, if one follows."""
        line = self._line
        at = target_end + 1 if line.startswith(">", target_end) else target_end
        if line.startswith(")", at):
            return at + 1
        title = _TITLE_OPENING.match(line, at)
        if title and title.end() <= self._last_parenthesis:
            return line.find(")", title.end()) + 1
        return None
