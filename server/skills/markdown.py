"""The little Markdown structure the registry reads: which lines are inside fenced code."""

from __future__ import annotations

import re
from collections.abc import Sequence

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def fenced(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (its fence lines included).

    A fence closes on a line of the same character, at least as long, with nothing else on it; an unclosed
    fence runs to the end, as in CommonMark.
    """
    inside: list[bool] = []
    fence: str | None = None
    for line in lines:
        opening = _FENCE.match(line.rstrip("\n"))
        if fence is None:
            if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
                fence = opening.group(1)
            inside.append(fence is not None)
        else:
            inside.append(True)
            closing = opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence)
            if closing and opening and not opening.group(2).strip():
                fence = None
    return inside
