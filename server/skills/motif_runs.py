"""MotifZip's runs: the runs of section nodes of a skill that may be occurrences of one procedure, with the
typed key that buckets them and the ports through which edges cross their boundary.

A motif is a run of one to MAX_RUN consecutive section nodes of a skill. Runs are bucketed by their typed
key (each node's role, normalized title and artifact kinds, and the edge pattern inside the run), so only
interface-compatible runs are ever compared (motif_discovery.py groups them). A run may sit in a macro only if
every state-changing node inside keeps a path to a verifier (`verifiable_nodes`).

Everything here is computed from a graph's nodes and edges alone: the graph's own per-node edge tables
(`SkillGraph.reach`, `edges_from`) are left unmade, as they would stay with every graph of the library
(about 15 KB a skill).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

from .contracts import Contract
from .graph import EdgeKind, SectionNode, SkillGraph
from .macros import Key, Occurrence, Port
from .motif_discovery import compiled
from .text import NodeWords, terms

MAX_RUN = 3

_STEP_TITLE = re.compile(r", step \d+$")
_DIGITS = re.compile(r"[0-9]+")


class Run(NamedTuple):
    """A run of consecutive nodes of one skill: its typed signature and inner edge pattern (`key`), its
    tokens and the ports through which edges cross its boundary."""

    occurrence: Occurrence
    key: Key
    tokens: int
    ports: frozenset[Port]


def runs_of(graph: SkillGraph, tokens: tuple[int, ...], node_terms: NodeWords) -> list[Run]:
    """Every run of the skill but those holding its intent (node 0, never shared), in (start, length)
    order. (A bulk build uses one RunShapes for all its skills.)"""
    shapes = RunShapes()
    return [
        Run(Occurrence(graph.skill, start, length), shapes.keys[key], sum(tokens[start : start + length]), ports)
        for start, length, key, ports in shapes.of_skill(graph, node_terms)
    ]


def run_key(graph: SkillGraph, occurrence: Occurrence) -> Key:
    """The key `runs_of` gives one run."""
    shapes = RunShapes()
    runs = shapes.of_skill(graph, [terms(node.text) for node in graph.nodes])
    return shapes.keys[next(key for start, length, key, _ in runs if (start, length) == occurrence[1:])]


Row = tuple[str, tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[int, str, str], ...]]
"""What a node brings to the key of a run holding it: its signature, its input and output kinds, and its
edges to nodes a run may hold with it ((target - node, kind, label), in key order)."""


class RunShapes:
    """The keys and ports of runs, each made once: a run's key follows from its nodes' rows (`Row`) and its
    ports from its nodes' reach (`_REACH_BITS`), and runs repeat both. A bulk build keeps one for all skills."""

    def __init__(self) -> None:
        self.keys: list[Key] = []
        """key number -> key"""
        self._rows: dict[Row, int] = {}
        """row -> its number"""
        self._row_list: list[Row] = []
        self._keys: dict[tuple[int, ...], int] = {}
        """row numbers of a run -> its key number"""
        self._ports: dict[tuple[int, ...], frozenset[Port]] = {}
        """reach of a run's nodes -> its ports"""

    def of_skill(self, graph: SkillGraph, node_terms: NodeWords) -> list[tuple[int, int, int, frozenset[Port]]]:
        """(start, length, key number, ports) of every run of the skill but those holding node 0, in order. A
        run never spans two files (SKILL.md and a Markdown reference, or two references)."""
        rows, reach, _ = self._rows_of(graph, node_terms)
        return list(self._runs(rows, reach, [node.provenance.file for node in graph.nodes]))

    def file(
        self,
        graph: SkillGraph,
        node_terms: NodeWords,
        buckets: list[dict[Occurrence, frozenset[Port]]],
        grow: Callable[[int], None],
    ) -> None:
        """File each run of the skill (`of_skill`) whose nodes are all verifiable (`verifiable_nodes`) in the
        bucket of its key number; `grow(key)` makes the buckets up to that key number."""
        rows, reach, verified = self._rows_of(graph, node_terms)
        verifiable = verifiable_nodes(graph, verified)
        files = [node.provenance.file for node in graph.nodes]
        every = None if all(verifiable) else verifiable
        file_runs(self, graph.skill, rows, reach, files, every, buckets, grow, Occurrence)

    def _runs(
        self, rows: list[int], reach: list[int], files: list[str]
    ) -> Iterator[tuple[int, int, int, frozenset[Port]]]:
        count = len(rows)
        for start in range(1, count):
            for stop in range(start + 1, min(start + MAX_RUN, count) + 1):
                if files[stop - 1] != files[start]:
                    break
                run = tuple(rows[start:stop])
                key = self._keys.get(run)
                if key is None:
                    key = self._new_key(run)
                spans = tuple(reach[start:stop])
                ports = self._ports.get(spans)
                if ports is None:
                    ports = self._new_ports(spans)
                yield start, stop - start, key, ports

    def _new_key(self, run: tuple[int, ...]) -> int:
        """The key number of a run of these rows, seen for the first time."""
        rows = [self._row_list[number] for number in run]
        length = len(rows)
        pattern = [(k, k + step, kind, label) for k, row in enumerate(rows) for step, kind, label in row[2]
                   if 0 <= k + step < length]  # fmt: skip
        self.keys.append((tuple([row[0] for row in rows]), tuple([row[1] for row in rows]), tuple(pattern)))
        key = self._keys[run] = len(self.keys) - 1
        return key

    def _new_ports(self, spans: tuple[int, ...]) -> frozenset[Port]:
        """The ports of a run whose nodes have this reach, seen for the first time."""
        ports = self._ports[spans] = _ports_of_reach(spans)
        return ports

    def _rows_of(self, graph: SkillGraph, node_terms: NodeWords) -> tuple[list[int], list[int], set[int]]:
        """Each node's row number and reach, and the sources of the skill's `verifies` edges."""
        nodes = graph.nodes
        near: list[list[tuple[int, str, str]]] = [[] for _ in nodes]
        reach = [0] * len(nodes)
        verified = set()
        for edge in graph.edges:
            source, target = edge.source, edge.target
            outward, inward, kind = _REACH[edge.kind]
            if kind == _VERIFIES:
                verified.add(source)
            step = target - source
            if -MAX_RUN < step < MAX_RUN:
                near[source].append((step, kind, edge.label))
            step = step if -MAX_RUN <= step <= MAX_RUN else (MAX_RUN if step > 0 else -MAX_RUN)
            reach[source] |= outward[step]
            reach[target] |= inward[-step]
        rows = []
        for node, words, inner in zip(nodes, node_terms, near, strict=True):
            inner.sort()
            row = (_node_signature(node, words), _io_kinds(node.contract), tuple(inner))
            number = self._rows.get(row)
            if number is None:
                number = self._rows[row] = len(self._row_list)
                self._row_list.append(row)
            rows.append(number)
        return rows, reach, verified


def _ports_of_reach(reach: tuple[int, ...]) -> frozenset[Port]:
    """The ports of a run whose nodes have this reach."""
    mask, length = 0, len(reach)
    for k, beyond in enumerate(reach):
        mask |= _port_bits(beyond, k, length - k)
    return _ports(mask)


@lru_cache(maxsize=1 << 14)
def _port_bits(beyond: int, k: int, after: int) -> int:
    """The port mask bits of a node at offset k of a run, with `after` nodes from it to the run's end, and this
    reach (nodes repeat their reach: a library has a few thousand)."""
    mask, group = 0, 0
    while beyond:
        if beyond & _CROSSING[k][after]:
            mask |= 1 << (MAX_RUN * group + k)
        beyond >>= _REACH_BITS
        group += 1
    return mask


_REACH_BITS = 2 * MAX_RUN
"""A node's reach: for each edge kind and direction (a group), bit j < MAX_RUN says an edge goes j + 1 or
more nodes back, bit MAX_RUN + j that one goes j + 1 or more forward."""
_GROUPS = [(kind, direction) for kind in EdgeKind for direction in ("out", "in")]
"""Port groups in order: the port (kind, direction, offset) is bit MAX_RUN * group + offset of a port mask."""


def _reach_bits(group: int, step: int) -> int:
    """The reach of one edge `step` nodes away (clipped to MAX_RUN) in a group."""
    back = sum(1 << j for j in range(MAX_RUN) if step <= -(j + 1))
    forward = sum(1 << (MAX_RUN + j) for j in range(MAX_RUN) if step >= j + 1)
    return (back | forward) << (_REACH_BITS * group)


def _edge_reach(kind: EdgeKind) -> tuple[dict[int, int], dict[int, int], str]:
    """The reach of an outgoing edge of this kind by its step, of an incoming one, and the kind's name."""
    outward, inward = _GROUPS.index((kind, "out")), _GROUPS.index((kind, "in"))
    steps = range(-MAX_RUN, MAX_RUN + 1)
    return {s: _reach_bits(outward, s) for s in steps}, {s: _reach_bits(inward, s) for s in steps}, kind.value


_REACH = {kind: _edge_reach(kind) for kind in EdgeKind}
_VERIFIES = EdgeKind.VERIFIES.value
_CROSSING = [[(1 << k) | (1 << (MAX_RUN + after - 1)) if after else 0 for after in range(MAX_RUN + 1)]
             for k in range(MAX_RUN)]  # fmt: skip
"""[k][after]: the reach bits by which a node at offset k of a run, with `after` nodes from it to the run's
end (itself included), has an edge of the group leaving the run: k + 1 or more back, `after` or more forward."""


@lru_cache(maxsize=1 << 12)
def _ports(mask: int) -> frozenset[Port]:
    """The ports of a mask; one set per mask, shared by every run that has it."""
    return frozenset(
        Port(direction, kind, offset)
        for group, (kind, direction) in enumerate(_GROUPS)
        for offset in range(MAX_RUN)
        if mask >> (MAX_RUN * group + offset) & 1
    )


def verifiable_nodes(graph: SkillGraph, verified: set[int] | None = None) -> tuple[bool, ...]:
    """Whether each node may sit in a macro: it changes nothing, or it keeps a path to a verifier (through
    a `verifies` edge, inside the macro or through its port), or its skill has no verifier at all. A run is
    verifiable when all its nodes are. `verified`: the sources of the skill's `verifies` edges, if known."""
    if verified is None:
        verified = {e.source for e in graph.edges if e.kind is EdgeKind.VERIFIES}
    if not verified:
        return (True,) * len(graph.nodes)
    return tuple(not node.contract.state_changing or node.index in verified for node in graph.nodes)


def ports_of(graph: SkillGraph, inside: range) -> frozenset[Port]:
    """The ports of a run, from the graph's edge tables (what `Run.ports` holds, computed alone)."""
    start, stop = inside.start, inside.stop
    ports = []
    for i in inside:
        targets, sources = graph.reach(i)
        ports += [Port("out", kind, i - start) for kind, low, high in targets if low < start or high >= stop]
        ports += [Port("in", kind, i - start) for kind, low, high in sources if low < start or high >= stop]
    return frozenset(ports)


def _io_kinds(contract: Contract) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The distinct kinds of a contract's inputs and of its outputs, sorted (a library has a few dozen pairs,
    and two fifths of its sections neither take nor give anything)."""
    inputs, outputs = contract.inputs, contract.outputs
    if not inputs and not outputs:
        return _NO_KINDS
    return _sorted_kinds(tuple([s.kind for s in inputs]), tuple([s.kind for s in outputs]))


_NO_KINDS: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


@lru_cache(maxsize=1 << 10)
def _sorted_kinds(inputs: tuple[str, ...], outputs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(sorted(set(inputs))), tuple(sorted(set(outputs)))


def _node_signature(node: SectionNode, words: Sequence[str]) -> str:
    if node.is_step:
        return f"{node.role.value}:step:{' '.join(words[:3])}"
    return f"{node.role.value}:{_title_words(node.title)}"


@lru_cache(maxsize=1 << 16)
def _title_words(title: str) -> str:
    """A title's terms without step numbers or digits: `Load the input table, step 2` -> `load input table`."""
    return " ".join(terms(_DIGITS.sub(" ", _STEP_TITLE.sub("", title))))


def file_runs_of(
    shapes: RunShapes,
    skill: str,
    rows: list[int],
    reach: list[int],
    files: list[str],
    verifiable: tuple[bool, ...] | None,
    buckets: list[dict[Occurrence, frozenset[Port]]],
    grow: Callable[[int], None],
    occurrence: type[Occurrence],
) -> None:
    """`RunShapes.file` of the nodes' rows, reach and files: the reference for `file_runs`, which is the C
    extension's when it is built."""
    for start, length, key, ports in shapes._runs(rows, reach, files):
        if verifiable is None or all(verifiable[start : start + length]):
            if key >= len(buckets):
                grow(key)
            buckets[key][occurrence(skill, start, length)] = ports


Filing = Callable[
    [RunShapes, str, list[int], list[int], list[str], tuple[bool, ...] | None,
     list[dict[Occurrence, frozenset[Port]]], Callable[[int], None], type[Occurrence]],
    None,
]  # fmt: skip
file_runs: Filing = file_runs_of if compiled is None else compiled.file_runs
"""The C extension's where it is built (the same filing as `file_runs_of`), else `file_runs_of`."""
