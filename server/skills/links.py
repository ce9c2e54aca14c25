"""Relative links in a SKILL.md body: what a package points at, with the line that points."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from .markdown import fenced

_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
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
        targets = [m["target"] for m in _INLINE.finditer(line)]
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
