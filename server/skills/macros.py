"""Macros: a procedure that recurs across skills, stored once and referenced from each place it occurs.

A macro is a run of consecutive section nodes (its occurrences, one per skill) that share a typed key and
the ports through which edges cross their boundary. Each occurrence keeps its source pointer and the macro
keeps the edge pattern inside it, so expanding every macro restores the source graph exactly
(compressed.py). What makes runs one macro is motif_discovery.py's concern; keeping the macros current is
macro_index.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any, NamedTuple

from .graph import EdgeKind

REFERENCE_TOKENS = 12
"""What one reference to a macro costs in the active representation (its id, ports and source pointer)."""
MIN_OCCURRENCES = 2

Pattern = tuple[tuple[int, int, str, str], ...]
"""Edges inside a run, by offsets: (source, target, kind, label)."""
Key = tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], Pattern]
"""(each node's role and normalized title, each node's input and output kinds, the inner edges)"""


class Level(IntEnum):
    """How much of a macro a context shows, least first."""

    NAME = 1
    CONTRACT = 2
    OUTLINE = 3
    FULL = 4


class Occurrence(NamedTuple):
    """Consecutive nodes of one skill. A tuple: an index hashes and orders millions of them, in C (its repr
    is a dataclass's, which macro ids are digests of)."""

    skill: str
    start: int
    length: int

    @property
    def nodes(self) -> range:
        return range(self.start, self.start + self.length)


class Port(NamedTuple):
    """An edge crossing a motif's boundary: `offset` is the inside node's position in the motif."""

    direction: str
    """`in` (from outside to the motif) or `out`."""
    kind: EdgeKind
    offset: int


@dataclass(frozen=True)
class Macro:
    macro_id: str
    name: str
    key: Key
    ports: frozenset[Port]
    occurrences: tuple[Occurrence, ...]
    prototype: Occurrence
    """The occurrence whose text stands for all of them in the active representation."""
    prototype_tokens: int
    gain: int
    default_level: Level = Level.CONTRACT
    """How a context shows it when it is there as a dependency (ReZip raises it on evidence)."""

    def __hash__(self) -> int:
        """By id: equal macros have equal ids, and hashing every occurrence (thousands, for a routine that
        recurs across a large library) took 10 ms of a hydration at 100,000 skills."""
        return hash(self.macro_id)

    @property
    def signature(self) -> tuple[str, ...]:
        return self.key[0]

    @property
    def internal_edges(self) -> tuple[tuple[int, int, EdgeKind, str], ...]:
        """The edge pattern inside the motif, by offsets: the same in every occurrence."""
        return tuple((s, t, EdgeKind(kind), label) for s, t, kind, label in self.key[2])


@dataclass(frozen=True)
class Compression:
    """A library's macros, and the sizes of its raw and active representations, in tokens."""

    macros: tuple[Macro, ...]
    raw_tokens: int
    active_tokens: int

    @property
    def ratio(self) -> float:
        return self.raw_tokens / self.active_tokens if self.active_tokens else 1.0

    def covering(self) -> dict[tuple[str, int], tuple[Macro, Occurrence]]:
        """(skill, node) -> the macro occurrence that holds it."""
        return {(o.skill, i): (m, o) for m in self.macros for o in m.occurrences for i in o.nodes}

    def held_in(self, skill: str) -> dict[int, tuple[Macro, Occurrence]]:
        """node -> the macro occurrence that holds it, for one skill."""
        return self._by_skill.get(skill, {})

    @cached_property
    def _by_skill(self) -> dict[str, dict[int, tuple[Macro, Occurrence]]]:
        by_skill: dict[str, dict[int, tuple[Macro, Occurrence]]] = {}
        for (skill, index), held in self.covering().items():
            by_skill.setdefault(skill, {})[index] = held
        return by_skill


def key_to_json(key: Key) -> str:
    return json.dumps(key, separators=(",", ":"))


def key_from_json(text: str) -> Key:
    def tuples(value: Any) -> Any:
        return tuple(tuples(v) for v in value) if isinstance(value, list) else value

    key: Key = tuples(json.loads(text))
    return key
