"""MotifZip: recurring procedures across skills become reversible, contract-preserving macros.

A motif is a run of one to MAX_RUN consecutive section nodes of a skill. Runs are bucketed by their typed
signature (each node's role, normalized title and artifact kinds, and the edge pattern inside the run),
so only interface-compatible runs are ever compared; inside a bucket, runs whose texts are similar (word
3-gram Jaccard >= SIMILARITY) are occurrences of one procedure. Text need only be similar: real libraries
repeat procedures as near-duplicates.

A group becomes a macro only if
- its boundary is stable: every occurrence has the same ports (the kinds and directions of the edges that
  cross its boundary), so dependencies are internal or exposed through ports;
- every state-changing node inside keeps a path to a verifier (inside, or through a `verifies` port);
- its description-length gain is positive: the tokens its occurrences take minus the prototype's and one
  reference per occurrence.
Macros are chosen greedily by gain, never overlapping. Each occurrence keeps its source pointer, and the
macro keeps the edge pattern inside it, so expanding every macro restores the source graph exactly.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .graph import Edge, EdgeKind, SkillGraph
from .text import terms

MAX_RUN = 3
SIMILARITY = 0.5
REFERENCE_TOKENS = 12
"""What one reference to a macro costs in the active representation (its id, ports and source pointer)."""
MIN_OCCURRENCES = 2

_STEP_TITLE = re.compile(r", step \d+$")


@dataclass(frozen=True, slots=True, order=True)
class Occurrence:
    skill: str
    start: int
    length: int

    @property
    def nodes(self) -> range:
        return range(self.start, self.start + self.length)


@dataclass(frozen=True, slots=True)
class Port:
    """An edge crossing a motif's boundary: `offset` is the inside node's position in the motif."""

    direction: str
    """`in` (from outside to the motif) or `out`."""
    kind: EdgeKind
    offset: int


@dataclass(frozen=True)
class Macro:
    macro_id: str
    name: str
    signature: tuple[str, ...]
    """Each node's role and normalized title."""
    internal_edges: tuple[tuple[int, int, EdgeKind, str], ...]
    """The edge pattern inside the motif, by offsets: the same in every occurrence."""
    ports: frozenset[Port]
    occurrences: tuple[Occurrence, ...]
    prototype: Occurrence
    """The occurrence whose text stands for all of them in the active representation."""
    prototype_tokens: int
    gain: int


@dataclass(frozen=True)
class Compression:
    """A library's macros, and for each skill which of its nodes a macro stands for."""

    macros: tuple[Macro, ...]
    raw_tokens: int
    active_tokens: int

    @property
    def ratio(self) -> float:
        return self.raw_tokens / self.active_tokens if self.active_tokens else 1.0

    def covering(self) -> dict[tuple[str, int], tuple[Macro, Occurrence]]:
        """(skill, node) -> the macro occurrence that holds it."""
        return {(o.skill, i): (m, o) for m in self.macros for o in m.occurrences for i in o.nodes}


Pattern = tuple[tuple[int, int, str, str], ...]
"""Edges inside a run, by offsets: (source, target, kind, label)."""


@dataclass(frozen=True)
class _Run:
    """A run of nodes, keyed by its typed signature and inner edge pattern: only runs of one key compare."""

    occurrence: Occurrence
    key: tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], Pattern]
    """(each node's role and normalized title, each node's input and output kinds, the inner edges)"""
    tokens: int

    @property
    def pattern(self) -> Pattern:
        return self.key[2]


def compress(graphs: Iterable[SkillGraph], node_tokens: dict[str, tuple[int, ...]]) -> Compression:
    """MotifZip over a library; deterministic (graphs are visited by name, ties broken by key)."""
    by_name = {g.skill: g for g in graphs}
    buckets: dict[tuple[object, ...], list[_Run]] = {}
    for name in sorted(by_name):
        for run in _runs(by_name[name], node_tokens[name]):
            buckets.setdefault(run.key, []).append(run)
    candidates = [macro for key in sorted(buckets, key=repr) for macro in _macros(by_name, buckets[key], node_tokens)]
    chosen = _select(candidates, by_name, node_tokens)
    raw = sum(sum(tokens) for tokens in node_tokens.values() if tokens)
    covered = sum(node_tokens[o.skill][i] for m in chosen for o in m.occurrences for i in o.nodes)
    dictionary = sum(m.prototype_tokens + REFERENCE_TOKENS * len(m.occurrences) for m in chosen)
    return Compression(tuple(chosen), raw, raw - covered + dictionary)


@dataclass(frozen=True)
class CompressedSkill:
    """A skill as the compressed library holds it: plain nodes and macro references, joined by edges whose
    ends inside a macro name the port they cross (the node's offset in the occurrence)."""

    skill: str
    units: tuple[int | tuple[str, Occurrence], ...]
    """A plain node's index, or (macro id, occurrence)."""
    edges: tuple[tuple[int, int, int, int, EdgeKind, str], ...]
    """(source unit, source offset, target unit, target offset, kind, label); offset 0 for a plain node."""


def compress_skill(compression: Compression, graph: SkillGraph) -> CompressedSkill:
    """Replace each macro occurrence in the skill by one unit; edges inside it are dropped (the macro keeps
    their pattern) and edges across its boundary are rewired to the unit through a declared port."""
    held = {i: (m, o) for m in compression.macros for o in m.occurrences if o.skill == graph.skill for i in o.nodes}
    units: list[int | tuple[str, Occurrence]] = []
    unit_of: dict[int, tuple[int, int]] = {}
    for index in range(len(graph.nodes)):
        if index not in held:
            unit_of[index] = (len(units), 0)
            units.append(index)
        else:
            macro, occurrence = held[index]
            if index == occurrence.start:
                units.append((macro.macro_id, occurrence))
            unit_of[index] = (len(units) - 1, index - occurrence.start)
    edges = []
    for edge in graph.edges:
        (source, source_offset), (target, target_offset) = unit_of[edge.source], unit_of[edge.target]
        if source == target and not isinstance(units[source], int):
            continue  # inside one occurrence: the macro's pattern holds it
        edges.append((source, source_offset, target, target_offset, edge.kind, edge.label))
    return CompressedSkill(graph.skill, tuple(units), tuple(edges))


def expand(compression: Compression, compressed: CompressedSkill) -> tuple[Edge, ...]:
    """The source graph's edges rebuilt from the compressed skill: the inverse of compress_skill."""
    macros = {m.macro_id: m for m in compression.macros}

    def node(unit: int, offset: int) -> int:
        held = compressed.units[unit]
        return held if isinstance(held, int) else held[1].start + offset

    edges = [Edge(node(s, so), node(t, to), kind, label) for s, so, t, to, kind, label in compressed.edges]
    for unit in compressed.units:
        if not isinstance(unit, int):
            macro_id, occurrence = unit
            pattern = macros[macro_id].internal_edges
            edges += [Edge(occurrence.start + s, occurrence.start + t, kind, label) for s, t, kind, label in pattern]
    return tuple(sorted(set(edges)))


def _runs(graph: SkillGraph, tokens: tuple[int, ...]) -> Iterator[_Run]:
    nodes = graph.nodes
    signatures = [_node_signature(graph, i) for i in range(len(nodes))]
    io_kinds = [_io_kinds(graph, i) for i in range(len(nodes))]
    for start in range(1, len(nodes)):  # node 0 is the skill's own intent: never shared
        for length in range(1, min(MAX_RUN, len(nodes) - start) + 1):
            inside = range(start, start + length)
            pattern = tuple(
                sorted((e.source - start, e.target - start, e.kind.value, e.label) for e in _internal(graph, inside))
            )
            key = (tuple(signatures[i] for i in inside), tuple(io_kinds[i] for i in inside), pattern)
            yield _Run(Occurrence(graph.skill, start, length), key, sum(tokens[i] for i in inside))


def _shingles(graph: SkillGraph, occurrence: Occurrence) -> frozenset[str]:
    words = [word for i in occurrence.nodes for word in terms(graph.nodes[i].text)]
    return frozenset(" ".join(words[k : k + 3]) for k in range(max(1, len(words) - 2)))


def _verifiable(graph: SkillGraph, occurrence: Occurrence) -> bool:
    """Every state-changing node inside keeps a path to a verifier (inside, or through a `verifies` port),
    unless its skill has no verifier at all."""
    has_verifier = any(e.kind is EdgeKind.VERIFIES for e in graph.edges)
    return not has_verifier or all(_verified(graph, i) for i in occurrence.nodes)


def _io_kinds(graph: SkillGraph, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    contract = graph.nodes[index].contract
    return tuple(sorted({s.kind for s in contract.inputs})), tuple(sorted({s.kind for s in contract.outputs}))


def _verified(graph: SkillGraph, index: int) -> bool:
    """A state-changing node keeps a path to a verifier (inside the motif or through a `verifies` port)."""
    return not graph.nodes[index].contract.state_changing or any(graph.successors(index, EdgeKind.VERIFIES))


def _node_signature(graph: SkillGraph, index: int) -> str:
    node = graph.nodes[index]
    if node.is_step:
        words = terms(node.text)[:3]
        return f"{node.role.value}:step:{' '.join(words)}"
    title = _STEP_TITLE.sub("", node.title)
    return f"{node.role.value}:{' '.join(terms(re.sub(r'[0-9]+', ' ', title)))}"


def _internal(graph: SkillGraph, inside: range) -> list[Edge]:
    return [edge for i in inside for edge in graph.edges_from(i) if edge.target in inside]


def _ports(graph: SkillGraph, inside: range) -> Iterator[Port]:
    start = inside.start
    for i in inside:
        for edge in graph.edges_from(i):
            if edge.target not in inside:
                yield Port("out", edge.kind, i - start)
        for edge in graph.edges_to(i):
            if edge.source not in inside:
                yield Port("in", edge.kind, i - start)


def _macros(
    by_name: dict[str, SkillGraph], runs: list[_Run], node_tokens: dict[str, tuple[int, ...]]
) -> Iterator[Macro]:
    """Groups of similar runs in one bucket that pass the boundary, verifier and gain checks."""
    if len({r.occurrence.skill for r in runs}) < MIN_OCCURRENCES:
        return
    clusters: list[tuple[frozenset[str], list[_Run]]] = []
    for run in runs:
        graph = by_name[run.occurrence.skill]
        if not _verifiable(graph, run.occurrence):
            continue
        shingles = _shingles(graph, run.occurrence)
        for representative, members in clusters:
            if _jaccard(representative, shingles) >= SIMILARITY:
                members.append(run)
                break
        else:
            clusters.append((shingles, [run]))
    for _, cluster in clusters:
        by_ports: dict[frozenset[Port], list[_Run]] = {}
        for run in cluster:
            ports = frozenset(_ports(by_name[run.occurrence.skill], run.occurrence.nodes))
            by_ports.setdefault(ports, []).append(run)
        for ports, members in by_ports.items():
            one_per_skill = list({r.occurrence.skill: r for r in reversed(members)}.values())[::-1]
            if len(one_per_skill) < MIN_OCCURRENCES:
                continue
            macro = _macro(by_name, one_per_skill, ports)
            if macro.gain > 0:
                yield macro


def _macro(by_name: dict[str, SkillGraph], runs: list[_Run], ports: frozenset[Port]) -> Macro:
    prototype = min(runs, key=lambda r: (r.tokens, r.occurrence))
    first = prototype.occurrence
    graph = by_name[first.skill]
    internal = tuple((s, t, EdgeKind(k), label) for s, t, k, label in prototype.pattern)
    occurrences = tuple(sorted(r.occurrence for r in runs))
    gain = sum(r.tokens for r in runs) - prototype.tokens - REFERENCE_TOKENS * len(runs)
    signature = prototype.key[0]
    digest = hashlib.sha256(repr((signature, occurrences)).encode()).hexdigest()[:12]
    title = graph.nodes[first.start].title
    return Macro(f"m-{digest}", title, signature, internal, ports, occurrences, first, prototype.tokens, gain)


def _select(
    candidates: list[Macro], by_name: dict[str, SkillGraph], node_tokens: dict[str, tuple[int, ...]]
) -> list[Macro]:
    """Greedy by gain; an occurrence overlapping a chosen one is dropped, and the macro re-checked."""
    claimed: set[tuple[str, int]] = set()
    chosen = []
    for macro in sorted(candidates, key=lambda m: (-m.gain, m.macro_id)):
        free = [o for o in macro.occurrences if not any((o.skill, i) in claimed for i in o.nodes)]
        if len(free) < MIN_OCCURRENCES:
            continue
        if len(free) < len(macro.occurrences):
            tokens = [sum(node_tokens[o.skill][i] for i in o.nodes) for o in free]
            prototype = min(zip(tokens, free, strict=True))
            gain = sum(tokens) - prototype[0] - REFERENCE_TOKENS * len(free)
            if gain <= 0:
                continue
            macro = Macro(
                macro.macro_id, by_name[prototype[1].skill].nodes[prototype[1].start].title, macro.signature,
                macro.internal_edges, macro.ports, tuple(free), prototype[1], prototype[0], gain,
            )  # fmt: skip
        claimed.update((o.skill, i) for o in macro.occurrences for i in o.nodes)
        chosen.append(macro)
    return chosen


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


@dataclass(frozen=True)
class LibraryStats:
    skills: int
    sections: int
    macros: int
    compression_ratio: float
    """Tokens of every section / tokens of the active representation (sections no macro holds, each macro's
    prototype once, and a reference per occurrence)."""
    dependency_preservation: float
    """Share of `requires`, `data` and `uses` edges the compressed view keeps (inside a macro's pattern, or
    across its boundary through a declared port)."""
    verifier_reachability: float
    """Share of state-changing sections with a verifier in the source that reach one in the compressed view."""


DEPENDENCIES = (EdgeKind.REQUIRES, EdgeKind.DATA, EdgeKind.USES)


def library_stats(compression: Compression, graphs: Iterable[SkillGraph]) -> LibraryStats:
    macros = {m.macro_id: m for m in compression.macros}
    skills = sections = dependencies = kept_dependencies = verified = kept_verified = 0
    for graph in graphs:
        skills += 1
        sections += len(graph.nodes)
        compressed = compress_skill(compression, graph)
        kept = {(e.source, e.target, e.kind, e.label) for e in _kept_edges(compressed, macros)}
        for edge in graph.edges:
            if edge.kind in DEPENDENCIES:
                dependencies += 1
                kept_dependencies += (edge.source, edge.target, edge.kind, edge.label) in kept
        for node in graph.nodes:
            targets = set(graph.successors(node.index, EdgeKind.VERIFIES))
            if node.contract.state_changing and targets:
                verified += 1
                kept_verified += any((node.index, t, EdgeKind.VERIFIES, "") in kept for t in targets)
    return LibraryStats(
        skills,
        sections,
        len(compression.macros),
        compression.ratio,
        kept_dependencies / dependencies if dependencies else 1.0,
        kept_verified / verified if verified else 1.0,
    )


def _kept_edges(compressed: CompressedSkill, macros: dict[str, Macro]) -> Iterator[Edge]:
    """The edges the compressed view still states: plain ones, macro patterns, and edges through declared
    ports (an edge whose end inside a macro is not one of its ports is lost, and not yielded)."""
    units = compressed.units

    def end(unit: int, offset: int, direction: str, kind: EdgeKind) -> int | None:
        held = units[unit]
        if isinstance(held, int):
            return held
        macro_id, occurrence = held
        return occurrence.start + offset if Port(direction, kind, offset) in macros[macro_id].ports else None

    for s, so, t, to, kind, label in compressed.edges:
        source, target = end(s, so, "out", kind), end(t, to, "in", kind)
        if source is not None and target is not None:
            yield Edge(source, target, kind, label)
    for unit in units:
        if not isinstance(unit, int):
            macro_id, occurrence = unit
            for s, t, kind, label in macros[macro_id].internal_edges:
                yield Edge(occurrence.start + s, occurrence.start + t, kind, label)
