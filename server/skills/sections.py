"""Splitting a SKILL.md body into section nodes: by headings, and by numbered steps inside a section.

The parts partition the body: joined in order they give it back exactly, so a node's text is always its
source and its line range is its provenance. Fenced code never splits (a `#` in a shell block is a comment).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .markdown import fenced

_HEADING = re.compile(r" {0,3}(#{1,6})[ \t]+")
_STEP = re.compile(r"^ {0,3}(\d{1,3})[.)][ \t]+\S")


@dataclass(frozen=True, slots=True)
class Part:
    """A run of body lines that becomes one node."""

    title: str
    """The heading's text; for a step, the heading's text and the step number (`Workflow, step 2`)."""
    level: int
    """The heading level (0 before the first heading); a step is one level below its section."""
    heading_path: tuple[str, ...]
    """Titles of the enclosing headings, outermost first, ending with this part's own heading."""
    is_step: bool
    first_line: int
    """1-based body line."""
    text: str

    @property
    def last_line(self) -> int:
        return self.first_line + self.text.count("\n") - (1 if self.text.endswith("\n") else 0)


def split_body(body: str) -> list[Part]:
    """The body's parts in order; an empty body has none."""
    if not body:
        return []
    lines = body.splitlines(keepends=True)
    in_code = fenced(lines)
    headings = [
        (index, *heading) for index, line in enumerate(lines) if not in_code[index] and (heading := _heading(line))
    ]
    if not headings or (headings[0][0] > 0 and any(line.strip() for line in lines[: headings[0][0]])):
        headings.insert(0, (0, 0, ""))  # text before the first heading is a part of its own
    parts: list[Part] = []
    path: list[tuple[int, str]] = []
    for position, (index, level, title) in enumerate(headings):
        begin = 0 if position == 0 else index  # blank lines before a first heading belong to it
        end = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
        if level:
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
        section = _Section(
            title or "(preamble)", level, tuple(t for _, t in path), begin, index + (1 if level else 0), end
        )
        parts.extend(section.parts(lines, in_code))
    return parts


def _heading(line: str) -> tuple[int, str] | None:
    """(level, title) of an ATX heading line: its title without a closing sequence (` ##`) or blanks around it.
    The title is cut by hand: as one regex (a lazy title, then optional blanks and #s, then blanks to the end),
    each blank of a long run was tried as the title's end with the rest of the run rescanned, quadratic."""
    match = _HEADING.match(line)
    if match is None:
        return None
    title = line[match.end() :].rstrip("\n").rstrip(" \t")
    unclosed = title.rstrip("#")
    if unclosed != title and unclosed[-1:] in (" ", "\t"):
        title = unclosed
    return len(match.group(1)), title.strip()


@dataclass(frozen=True, slots=True)
class _Section:
    title: str
    level: int
    heading_path: tuple[str, ...]
    begin: int
    content: int
    """First line index after the heading."""
    end: int

    def parts(self, lines: list[str], in_code: list[bool]) -> list[Part]:
        """The section as one part, or as its introduction (if any) and one part per numbered step."""
        steps = [i for i in range(self.content, self.end) if not in_code[i] and _STEP.match(lines[i])]
        if len(steps) < 2:
            return [self._part(self.title, self.level, self.heading_path, False, lines, self.begin, self.end)]
        parts = []
        if steps[0] > self.begin:
            parts.append(self._part(self.title, self.level, self.heading_path, False, lines, self.begin, steps[0]))
        for number, (first, stop) in enumerate(zip(steps, [*steps[1:], self.end], strict=True), start=1):
            title = f"{self.title}, step {number}"
            parts.append(self._part(title, self.level + 1, (*self.heading_path, title), True, lines, first, stop))
        return parts

    @staticmethod
    def _part(
        title: str, level: int, path: tuple[str, ...], is_step: bool, lines: list[str], first: int, stop: int
    ) -> Part:
        return Part(title, level, path, is_step, first + 1, "".join(lines[first:stop]))
